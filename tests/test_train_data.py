"""amdkv.train.data and amdkv.train.args: SFT data from every corpus format, RL prompt rows with
their metadata columns, the level curriculum, and reading configs (TRL fields + the `amdkv:` section)."""

from __future__ import annotations

import pytest

from amdkv.errors import BadInputError
from amdkv.prompts import PromptConfig, prompt_key
from amdkv.tasks.suites import load_suite
from test_trajectory import CONFIG, two_turns

datasets = pytest.importorskip("datasets", reason="training data needs datasets (pip install 'amdkv[data]')")


@pytest.fixture(scope="module")
def train_tasks():
    return load_suite("builtin:train")


@pytest.fixture(scope="module")
def relu(train_tasks):
    return next(t for t in train_tasks if t.id == "l1_relu")


# ------------------------------------------------------------------------------ SFT
def test_sft_from_trajectories_best_turn_drops_failures(relu):
    """`trajectories` rows (read back through parquet) -> conversations up to the best correct turn;
    a trajectory without a correct turn is dropped (SFT imitates what worked)."""
    from amdkv.prompts.trajectory import features
    from amdkv.train.data import sft_dataset, sft_format

    good = two_turns(relu)
    failed = two_turns(relu)
    failed.turns = failed.turns[:1]
    failed.turns[0].feedback = None
    ds = datasets.Dataset.from_list([good.to_row(), failed.to_row()], features=features())
    assert sft_format(ds.column_names) == "trajectories"
    out = sft_dataset(ds)
    assert len(out) == 1 and out.column_names == ["messages"]
    assert [m["content"] for m in out[0]["messages"] if m.get("role") == "assistant"] == \
        [t.reply for t in good.turns]
    last = sft_dataset(ds, trajectory_target="last_turn")
    assert len(last) == 2 and set(last.column_names) == {"prompt", "completion"}
    assert last[0]["completion"][0]["content"] == good.turns[-1].reply
    with pytest.raises(BadInputError, match="no SFT examples"):
        sft_dataset(ds.select([1]))


def test_sft_from_messages_and_prompt_completion(relu):
    from datasets import Features

    from amdkv.prompts.trajectory import message_features
    from amdkv.train.data import sft_dataset

    messages = two_turns(relu).messages()
    ds = datasets.Dataset.from_list([{"messages": messages, "task_id": "l1_relu"}],
                                    features=Features({"messages": message_features(),
                                                       "task_id": datasets.Value("string")}))
    out = sft_dataset(ds)
    assert out.column_names == ["messages"]
    assert [{k: v for k, v in m.items() if v is not None} for m in out[0]["messages"]] == messages
    pc = datasets.Dataset.from_list([{"prompt": messages[:-1], "completion": messages[-1:], "extra": 1}])
    assert set(sft_dataset(pc).column_names) == {"prompt", "completion"}
    with pytest.raises(BadInputError, match="cannot make SFT data"):
        sft_dataset(datasets.Dataset.from_list([{"text": "x"}]))


def test_reference_solution_examples(train_tasks):
    from amdkv.train.data import reference_solution, reference_solution_examples, solution_reply

    tasks = [t for t in train_tasks if t.id in ("l1_relu", "l1_softmax")]
    rows = reference_solution_examples(tasks, PromptConfig(shots=0))
    assert len(rows) == 2
    for row, task in zip(rows, tasks):
        assert [m["role"] for m in row["prompt"]] == ["system", "user"]
        assert row["completion"] == [{"role": "assistant", "content": solution_reply(reference_solution(task))}]
    bare = reference_solution_examples(tasks, PromptConfig(shots=0), system_prompt=False)
    assert [m["role"] for m in bare[0]["prompt"]] == ["user"]
    assert bare[0]["prompt"][0] == rows[0]["prompt"][1]


# ------------------------------------------------------------------------------ RL
def test_rl_rows_carry_metadata_columns(relu):
    from amdkv.prompts.trajectory import rl_prompt_row
    from amdkv.train.data import rl_prompt_dataset

    ds = rl_prompt_dataset([relu], CONFIG)
    row = ds[0]
    assert {k: row[k] for k in rl_prompt_row(relu, CONFIG)} == rl_prompt_row(relu, CONFIG)
    assert (row["level"], row["op_family"], row["suite"], row["split"]) == (relu.level, relu.op_family, relu.suite,
                                                                            "train")
    bare = rl_prompt_dataset([relu], CONFIG, system_prompt=False)[0]
    assert [m["role"] for m in bare["prompt"]] == ["user"] and bare["prompt_key"] == prompt_key(bare["prompt"])


def test_curriculum_order(train_tasks):
    from amdkv.train.data import CurriculumStage, curriculum_order, rl_prompt_dataset

    stages = [CurriculumStage.from_mapping({"levels": [1], "prompts": 40}),
              CurriculumStage.from_mapping({"levels": [2, 3], "prompts": 10})]
    order = curriculum_order(train_tasks, stages, seed=3)
    assert len(order) == 50
    assert all(t.level == 1 for t in order[:40]) and all(t.level in (2, 3) for t in order[40:])
    level1 = sorted({t.id for t in train_tasks if t.level == 1})
    assert sorted({t.id for t in order[:len(level1)]}) == level1  # each pass covers the stage's tasks once
    assert [t.id for t in curriculum_order(train_tasks, stages, seed=3)] == [t.id for t in order]
    assert [t.id for t in curriculum_order(train_tasks, stages, seed=4)] != [t.id for t in order]
    ds = rl_prompt_dataset(train_tasks, CONFIG, stages, seed=3)
    assert ds["task_id"] == [t.id for t in order]
    with pytest.raises(BadInputError, match="levels"):
        curriculum_order(train_tasks, [CurriculumStage.from_mapping({"levels": [9], "prompts": 1})])
    with pytest.raises(BadInputError, match="stage"):
        CurriculumStage.from_mapping({"level": 1, "prompts": 2})


# ------------------------------------------------------------------------------ configs
def test_config_file_sections_and_overrides(tmp_path):
    """TRL fields through TrlParser (file, then command line), the amdkv section with nested keys and
    `--amdkv.x.y` overrides; unknown keys refused with the known ones."""
    pytest.importorskip("trl", reason="SFT formatting uses TRL (pip install 'amdkv[train]')")
    from trl import GRPOConfig

    from amdkv.train.args import AmdkvRLArguments, parse_config

    cfg = tmp_path / "rl.yaml"
    cfg.write_text("output_dir: out\nlearning_rate: 3.0e-6\nuse_cpu: true\nbf16: false\nnum_generations: 4\n"
                   "model_name_or_path: some/model\nenv: {AMDKV_TEST_ENV_VAR: 'yes'}\n"
                   "amdkv:\n  suite: builtin:level1\n  reward: {format: 0.0, correct: 2}\n"
                   "  verifier: {url: 'http://127.0.0.1:9', timeout_s: 30}\n"
                   "  curriculum: [{levels: [1], prompts: 8}, {levels: [2, 3], prompts: 4}]\n")
    grpo, model, amdkv = parse_config(GRPOConfig, AmdkvRLArguments,
                                      ["--config", str(cfg), "--learning_rate", "1e-5",
                                       "--amdkv.verifier.timeout_s", "45", "--amdkv.audit.every_steps=10"])
    assert grpo.learning_rate == 1e-5 and grpo.num_generations == 4 and model.model_name_or_path == "some/model"
    assert amdkv.suite == "builtin:level1" and amdkv.reward.correct == 2.0 and amdkv.reward.format == 0.0
    assert amdkv.reward.compiled == 0.4  # untouched defaults stay
    assert amdkv.verifier.url == "http://127.0.0.1:9" and amdkv.verifier.timeout_s == 45.0
    assert amdkv.audit.every_steps == 10 and [s.prompts for s in amdkv.curriculum] == [8, 4]
    import os

    assert os.environ.pop("AMDKV_TEST_ENV_VAR") == "yes"
    cfg.write_text("output_dir: out\namdkv:\n  verifer: {url: x}\n")
    with pytest.raises(BadInputError, match="verifer"):
        parse_config(GRPOConfig, AmdkvRLArguments, ["--config", str(cfg)])
    cfg.write_text("output_dir: out\nlearning_rat: 1\n")
    with pytest.raises(BadInputError, match="learning_rat"):
        parse_config(GRPOConfig, AmdkvRLArguments, ["--config", str(cfg)])
    cfg.write_text("output_dir: out\namdkv:\n  max_turns: many\n")
    with pytest.raises(BadInputError, match="max_turns"):
        parse_config(GRPOConfig, AmdkvRLArguments, ["--config", str(cfg)])


def test_shipped_configs_parse():
    """Every YAML under training_configs/ reads without error (the 8x MI300X ones with `--use_cpu true`:
    transformers refuses bf16 on a machine without a GPU while reading the arguments)."""
    pytest.importorskip("trl", reason="SFT formatting uses TRL (pip install 'amdkv[train]')")
    from pathlib import Path

    from trl import GRPOConfig, SFTConfig

    from amdkv.train.args import AmdkvRLArguments, AmdkvSFTArguments, parse_config

    folder = Path(__file__).resolve().parent.parent / "training_configs"
    configs = sorted(folder.glob("*.yaml"))
    assert {"sft_qwen3_8b.yaml", "rl_qwen3_8b.yaml"} <= {p.name for p in configs}
    for path in configs:
        kind = (SFTConfig, AmdkvSFTArguments) if path.name.startswith("sft") else (GRPOConfig, AmdkvRLArguments)
        trl_args, _, amdkv = parse_config(*kind, ["--config", str(path), "--use_cpu", "true"])
        assert trl_args.output_dir, path.name
        assert amdkv is not None
