"""`RayVerifier`: the verifier interface over a Ray cluster, one verification actor per node.

Shape (docs/ray.md gives the why of each decision):

- **One actor per node**, pinned to it (`NodeAffinitySchedulingStrategy`, hard), seeing all of the
  node's GPUs and cores without reserving them in Ray's accounting (two RayVerifiers of one run,
  e.g. `amdkv gen`'s functional stage and its main verifier, must both fit on every node; a
  reservation of the whole node would leave the second waiting forever), and opening
  our own `open_verifier(config)` inside: a `Verifier` on a one-GPU or cpu node, a
  `MultiGpuScheduler` (per-GPU queues, health checks, quarantine) on a multi-GPU node. Ray moves
  work between nodes; everything below a node stays the code that is tested on one machine.
- **Capacity is counted by the driver.** Each actor advertises its slots (`config.jobs` of its
  verifier); the driver keeps at most that many submissions in flight per actor and sends the next
  one to the live actor with the most free slots. Nothing queues inside an actor, so a node that
  dies holds only what it was running, and a slow node is not given work it cannot start.
- **A lost node loses only its in-flight work.** When a call fails because its actor died
  (`RayActorError`: the node was removed, the process was killed), that submission goes back to
  the front of the queue for another live actor; the dead actor gets nothing more. A lost run is
  never a verdict. A submission that lost `config.max_attempts` actors, or that finds no live actor
  left, ends `infra_error` (reason `ray_node_lost` / `no_live_ray_node`): the harness's failure,
  never the candidate's.
- **Results are the same `Verdict`s** (the actor's `Verdict.to_dict()`, read back with
  `Verdict.from_dict`), with `env["ray"]` saying which node judged it and what was retried, and
  the echoed `candidate_sha256` checked against what was sent.
- **Tasks travel as their text.** A `Task`'s cases may hold closures that do not pickle, and its
  file may not exist on another node: the driver sends the Task without its cases; the actor
  uses the task's own path when that file has the same content on its node (same install, shared
  disk), else writes the text content-addressed under its cache dir (`tasks.isolated.stored_task_path`)
  and loads it there (tasks are trusted code, as for every local verifier), keeping the driver's
  id, suite, metadata and tolerance. The case names must match, else the verdict is infra_error.
- **Per-node settings.** Every actor gets the driver's `VerifierConfig` except `cache_dir`, which is
  the node's own (`AMDKV_CACHE_DIR` there, else its ~/.cache/amdkv): reference and verdict caches
  are per node.

All actors must report the same platform and device (an MI300X verdict and an H200 verdict in one
report would mislabel one of them): a mixed cluster is refused at open, with a hint to select nodes
by a custom resource (`node_resource=`).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import logging
import os
import queue
import signal
import socket
import threading
import time
from concurrent.futures import Future
from typing import Any

from amdkv.cluster.options import RAY_EXTRA_HINT
from amdkv.config import VerifierConfig, resolve_config
from amdkv.errors import AmdkvError, BadInputError, InfrastructureError
from amdkv.verify.api import NOT_STARTED_BEFORE_DEADLINE, VERIFIER_CLOSED, BaseVerifier, as_task, deadline_passed
from amdkv.verify.candidate import Candidate, as_candidate
from amdkv.verify.platform import PlatformInfo
from amdkv.verify.verdict import Verdict, infra_error_verdict

STARTUP_TIMEOUT_S = 300.0   # an actor imports torch and starts its verifier's fork server


# ------------------------------------------------------------------------------------ node side
class NodeVerifier:
    """What runs inside each node's actor: our local verifier for that node, fed one submission
    per call. Threaded actor (max_concurrency > slots), so `verify` calls run side by side and
    `describe`/`stats` answer while they do."""

    def __init__(self, config: dict[str, Any]) -> None:
        from amdkv.verify.scheduler import open_verifier

        node_config = VerifierConfig.from_dict(config).replace(cache_dir=VerifierConfig.from_env().cache_dir)
        self._verifier = open_verifier(node_config)
        self._tasks: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        import ray

        from amdkv import __version__

        v = self._verifier
        return {"node_id": ray.get_runtime_context().get_node_id(), "host": socket.gethostname(),
                "pid": os.getpid(), "platform": dataclasses.asdict(v.platform),
                "device_description": v.device_description, "slots": int(v.config.jobs), "amdkv": __version__,
                "gpus": list(getattr(v, "gpus", [])) or None}

    def verify(self, shipped: Any, case_names: list[str], candidate: Candidate) -> dict[str, Any]:
        task = self._task(shipped, case_names)
        return self._verifier.submit(task, candidate).result().to_dict()

    def _task(self, shipped: Any, case_names: list[str]) -> Any:
        """The driver's task, with cases loaded from its text on this node (once per task)."""
        from pathlib import Path

        from amdkv.tasks.isolated import stored_task_path
        from amdkv.tasks.loader import load_task

        key = (shipped.source_hash, shipped.id)
        with self._lock:
            if key in self._tasks:
                return self._tasks[key]
            own = Path(shipped.path) if shipped.path else None
            if own is None or not own.is_file() or own.read_text(errors="replace") != shipped.source:
                own = stored_task_path(shipped.source, self._verifier.config.cache_path)
            loaded = load_task(own, suite=shipped.suite, task_id=shipped.id)
            names = [c.name for c in loaded.cases]
            if names != list(case_names):
                raise AmdkvError(f"task {shipped.id} loaded on this node has cases {names}, the driver's has "
                                 f"{list(case_names)}", hint="tasks whose cases are not defined by their file "
                                                             "cannot be verified over Ray; verify them locally")
            task = dataclasses.replace(shipped, path=str(own), cases=loaded.cases)
            self._tasks[key] = task
            return task

    def close(self) -> None:
        self._verifier.close()


# ------------------------------------------------------------------------------------ driver side
@dataclasses.dataclass
class _Item:
    shipped: Any                    # the Task without its cases
    case_names: list[str]
    candidate: Candidate
    future: "Future[Verdict]"
    deadline: float | None
    history: list[dict[str, Any]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class _Node:
    actor: Any
    info: dict[str, Any]
    in_flight: dict[Any, _Item] = dataclasses.field(default_factory=dict)   # ObjectRef -> item
    alive: bool = True
    started: int = 0
    finished: int = 0
    lost: int = 0
    why_dead: str | None = None

    @property
    def slots(self) -> int:
        return max(1, int(self.info["slots"]))

    @property
    def free(self) -> int:
        return self.slots - len(self.in_flight) if self.alive else 0

    @property
    def label(self) -> str:
        return f"{self.info['host']}/{self.info['node_id'][:8]}"


class RayVerifier(BaseVerifier):
    """Verify on a Ray cluster. `address`: `auto` (the cluster this machine joined with `ray start`),
    `local` (start a one-machine cluster), or `HOST:PORT`; when this process is already connected
    (`ray.init` was called), that connection is used. `config`: the VerifierConfig every node's
    verifier opens with (`jobs` = that node's slots). `node_resource`: only nodes offering this
    custom Ray resource get an actor (each actor takes one unit of it); default every node with
    at least one CPU. Use as a context manager."""

    def __init__(self, address: str = "auto", config: VerifierConfig | str | None = None, *,
                 node_resource: str | None = None, startup_timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        self.config = resolve_config(config)
        self.address = address
        self.node_resource = node_resource
        self._ray = _import_ray()
        # ray.init leaves its own SIGTERM handler in this process after shutdown (one that, with a
        # local node, drains it over gRPC); close() puts back the one this process had
        self._sigterm_before = signal.getsignal(signal.SIGTERM)
        self._owns_connection = _connect(self._ray, address)
        self._cond = threading.Condition(threading.RLock())
        self._queue: collections.deque[_Item] = collections.deque()
        self._answers: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._closed = False
        try:
            self._nodes = self._start_actors(startup_timeout_s)
            first = self._nodes[0].info
            self.platform = PlatformInfo(**first["platform"])
            self.device_description = first["device_description"]
        except BaseException:
            self._shutdown()
            raise
        self._dispatcher = threading.Thread(target=self._dispatch, name="amdkv-ray-dispatch", daemon=True)
        self._dispatcher.start()

    # ------------------------------------------------------------------ start-up
    def _eligible_nodes(self) -> list[dict[str, Any]]:
        nodes = [n for n in self._ray.nodes() if n.get("Alive")]
        want = self.node_resource
        return [n for n in nodes if (n["Resources"].get(want, 0) >= 1 if want else n["Resources"].get("CPU", 0) >= 1)]

    def _start_actors(self, timeout: float) -> list[_Node]:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        eligible = self._eligible_nodes()
        if not eligible:
            what = f"the custom resource {self.node_resource!r}" if self.node_resource else "a CPU"
            raise InfrastructureError(f"no live node of the Ray cluster at {self.address!r} offers {what}",
                                      hint="start nodes with `ray start --address HEAD:6379` (see docs/ray.md)")
        remote_cls = self._ray.remote(NodeVerifier)
        config = self.config.to_dict()
        actors = []
        for n in eligible:
            # no CPUs/GPUs reserved in Ray's accounting (see the module docstring); the worker sees
            # every GPU of its node (Ray leaves CUDA/HIP_VISIBLE_DEVICES alone at num_gpus=0) and
            # torch uses the node's cores, as a local run would (Ray would force 1 thread)
            cores = max(1, int(n["Resources"].get("CPU", 1)))
            options: dict[str, Any] = {
                "num_cpus": 0, "num_gpus": 0, "runtime_env": {"env_vars": {"OMP_NUM_THREADS": str(cores)}},
                "max_concurrency": self.config.jobs + 4, "max_restarts": 0,
                "scheduling_strategy": NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)}
            if self.node_resource:
                options["resources"] = {self.node_resource: 1}
            actors.append(remote_cls.options(**options).remote(config))
        described = {a: a.describe.remote() for a in actors}
        ready, _ = self._ray.wait(list(described.values()), num_returns=len(described), timeout=timeout)
        nodes, failures = [], []
        for actor, ref in described.items():
            if ref not in ready:
                failures.append(f"an actor did not start within {timeout:.0f} s")
                self._ray.kill(actor)
                continue
            try:
                nodes.append(_Node(actor, self._ray.get(ref)))
            except Exception as exc:  # noqa: BLE001 - an actor that cannot open its verifier is left out, and said
                failures.append(f"{type(exc).__name__}: {str(exc)[-600:]}")
                self._ray.kill(actor)
        if failures:
            logging.getLogger(__name__).warning("Ray nodes left out: %s", failures)
        if not nodes:
            raise InfrastructureError(f"no node of the Ray cluster could open a verifier: {failures}",
                                      hint="is amdkv (the same version) installed on every node? " + RAY_EXTRA_HINT)
        kinds = {(n.info["platform"]["name"], n.info["device_description"], n.info["amdkv"]) for n in nodes}
        if len(kinds) > 1:
            self._nodes = nodes
            raise BadInputError(f"the Ray cluster's nodes judge on different platforms/devices/amdkv versions: "
                                f"{sorted(kinds)}", hint="one run, one platform: give the nodes you want a custom "
                                                         "resource (ray start --resources '{\"amdkv\": 1}') and pass "
                                                         "node_resource='amdkv', or run one cluster per kind")
        self.failures = failures
        return nodes

    # ------------------------------------------------------------------ BaseVerifier
    def submit(self, task: Any, candidate: Any = None, *, source: str | None = None, language: str | None = None,
               deadline: float | None = None) -> "Future[Verdict]":
        return self._submit_prepared(self._prepare(task, candidate, source=source, language=language), deadline)

    def _prepare(self, task: Any, candidate: Any, *, source: str | None = None,
                 language: str | None = None) -> tuple[Any, list[str], Candidate]:
        if self._closed:
            raise AmdkvError("this RayVerifier is closed", hint="open a new one (use it as a context manager)")
        task = as_task(task)
        return dataclasses.replace(task, cases=[]), [c.name for c in task.cases], \
            as_candidate(candidate, source=source, language=language)

    def _submit_prepared(self, prepared: tuple[Any, list[str], Candidate], deadline: float | None) -> "Future[Verdict]":
        fut: Future[Verdict] = Future()
        fut.set_running_or_notify_cancel()
        with self._cond:
            if self._closed:
                raise AmdkvError("this RayVerifier is closed", hint="open a new one")
            self._queue.append(_Item(*prepared, future=fut, deadline=deadline))
            self._pump()
        return fut

    def close(self) -> None:
        """Finish what is running (queued work ends `infra_error` / `verifier_closed`), then stop the
        actors, and the Ray connection if this verifier made it."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            while self._queue:
                item = self._queue.popleft()
                self._resolve(item, self._infra(item, "the verifier was closed", VERIFIER_CLOSED))
            while any(n.in_flight for n in self._nodes):
                self._cond.wait(timeout=1.0)
        self._answers.put(None)
        self._dispatcher.join()
        self._shutdown()

    # ------------------------------------------------------------------ views
    @property
    def nodes(self) -> list[dict[str, Any]]:
        return [n.info for n in self._nodes]

    def stats(self) -> dict[str, Any]:
        with self._cond:
            return {n.label: {"node_id": n.info["node_id"], "slots": n.slots, "alive": n.alive,
                              "in_flight": len(n.in_flight), "started": n.started, "finished": n.finished,
                              "lost": n.lost, "why_dead": n.why_dead} for n in self._nodes}

    # ------------------------------------------------------------------ dispatch
    def _pump(self) -> None:
        """Send queued work to the live actors with free slots (caller holds the condition)."""
        while self._queue:
            live = [n for n in self._nodes if n.alive]
            if not live:
                while self._queue:
                    item = self._queue.popleft()
                    self._resolve(item, self._infra(item, "no live Ray node is left to verify on "
                                                          f"({self._dead_nodes()})", "no_live_ray_node"))
                return
            node = max(live, key=lambda n: (n.free, -n.started))
            if node.free <= 0:
                return
            item = self._queue.popleft()
            if deadline_passed(item.deadline):
                self._resolve(item, self._infra(item, "not started before the caller's deadline",
                                                NOT_STARTED_BEFORE_DEADLINE))
                continue
            ref = node.actor.verify.remote(item.shipped, item.case_names, item.candidate)
            node.in_flight[ref] = item
            node.started += 1
            item.history.append({"node": node.info["node_id"], "host": node.info["host"], "started": time.time()})
            ref.future().add_done_callback(functools.partial(self._arrived, node, ref))

    def _arrived(self, node: _Node, ref: Any, fut: "Future[Any]") -> None:
        """Ray's callback thread: hand the answer to our dispatcher thread. Calling back into Ray
        from here (ray.kill, even .remote()) can deadlock its core worker, so nothing else is done."""
        self._answers.put((node, ref, fut))

    def _dispatch(self) -> None:
        """The driver's one dispatcher thread: takes answers in arrival order until closed."""
        while True:
            answer = self._answers.get()
            if answer is None:
                return
            try:
                self._finished(*answer)
            except Exception:  # noqa: BLE001 - the dispatcher must outlive one bad answer
                logging.getLogger(__name__).exception("RayVerifier could not handle an answer")

    def _finished(self, node: _Node, ref: Any, fut: "Future[Any]") -> None:
        """One call came back: a verdict, a lost actor (retry elsewhere), or a harness failure."""
        from ray.exceptions import RayActorError

        lost, verdict, failure = None, None, ""
        try:
            verdict = Verdict.from_dict(fut.result())
        except RayActorError as exc:
            lost = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
        except Exception as exc:  # noqa: BLE001 - the node's harness failed: infra_error, never the candidate's
            failure = f"{type(exc).__name__}: {str(exc)[-3000:]}"
        with self._cond:
            item = node.in_flight.pop(ref)
            step = item.history[-1]
            step["seconds"] = round(time.time() - step.pop("started"), 3)
            if lost is not None:
                node.lost += 1
                self._mark_dead(node, lost)
                step["lost"] = lost
                if len(item.history) < self.config.max_attempts and not self._closed:
                    self._queue.appendleft(item)      # a lost run is never a verdict: run it elsewhere
                else:
                    self._resolve(item, self._infra(item, f"its Ray node was lost {len(item.history)} time(s); "
                                                          f"last: {lost}", "ray_node_lost"))
            else:
                node.finished += 1
                if verdict is None:
                    verdict = self._infra(item, f"the verifier on {node.label} failed: {failure}", "harness_failure")
                elif verdict.candidate_sha256 != item.candidate.sha256:
                    verdict = self._infra(item, f"{node.label} answered for candidate {verdict.candidate_sha256}, "
                                                f"not {item.candidate.sha256}", "harness_failure")
                self._resolve(item, verdict)
            if not self._closed:
                self._pump()
            self._cond.notify_all()

    def _mark_dead(self, node: _Node, why: str) -> None:
        if not node.alive:
            return
        node.alive, node.why_dead = False, why   # killed for good at close(), in case it was only unreachable
        logging.getLogger(__name__).warning("Ray node %s lost (%s); its in-flight work is retried elsewhere",
                                            node.label, why)

    def _dead_nodes(self) -> str:
        return "; ".join(f"{n.label}: {n.why_dead}" for n in self._nodes if not n.alive) or "none started"

    def _resolve(self, item: _Item, verdict: Verdict) -> None:
        verdict.env = dict(verdict.env or {})
        verdict.env["ray"] = {"node": item.history[-1]["node"] if item.history else None,
                              "host": item.history[-1]["host"] if item.history else None,
                              "attempts": len(item.history), "history": item.history}
        item.future.set_result(verdict)

    def _infra(self, item: _Item, message: str, reason: str) -> Verdict:
        return infra_error_verdict(reason, message, task_id=item.shipped.id, language=item.candidate.language,
                                   platform=self.platform.name if hasattr(self, "platform") else None,
                                   device=getattr(self, "device_description", None),
                                   candidate_sha256=item.candidate.sha256)

    def _shutdown(self) -> None:
        for n in getattr(self, "_nodes", []):
            if n.alive:
                with contextlib.suppress(Exception):  # the actor's processes end with it either way
                    self._ray.get(n.actor.close.remote(), timeout=60)
            with contextlib.suppress(Exception):
                self._ray.kill(n.actor)
        if self._owns_connection:
            self._ray.shutdown()
            self._owns_connection = False
            if threading.current_thread() is threading.main_thread() and self._sigterm_before is not None:
                signal.signal(signal.SIGTERM, self._sigterm_before)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise BadInputError(f"--ray needs Ray, which this installation lacks ({exc})", hint=RAY_EXTRA_HINT) from None
    return ray


def _connect(ray: Any, address: str) -> bool:
    """Join (or start) the cluster; True when this call made the connection (close() ends it)."""
    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "configure_logging": True}
    try:
        if address == "local":
            # "local" said to Ray too: with no address, ray.init joins the cluster this machine last
            # started (its temp folder's record) instead of starting one of its own
            ray.init(address="local", include_dashboard=False, **kwargs)
        else:
            ray.init(address=address, **kwargs)
    except ConnectionError as exc:
        raise InfrastructureError(f"no Ray cluster at {address!r}: {exc}",
                                  hint="start one (`ray start --head` on the head node, `ray start --address "
                                       "HEAD:6379` on the others; docs/ray.md), pass its HOST:PORT, or use "
                                       "--ray local for a one-machine cluster") from None
    return True
