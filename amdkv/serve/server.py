"""Start `amdkv serve`: one verifier for the node, the app, uvicorn on one socket.

Order matters: the settings are checked first (a refusal costs nothing), the token is removed
from this process's environment before any worker process starts (workers inherit the
environment, and a candidate may read `os.environ`), then the suite is loaded and the verifier
opened, then the socket is bound and the startup line printed, then requests are served.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from amdkv.errors import AmdkvError, InfrastructureError
from amdkv.serve.protocol import PROTOCOL, TOKEN_ENV
from amdkv.serve.service import ServeSettings, VerificationService

GRACEFUL_SHUTDOWN_S = 30


def run_server(settings: ServeSettings, *, suite: str, config_overrides: dict[str, Any], gpus: str | None = None,
               log_level: str = "warning", access_log: bool = False) -> None:
    settings.check()
    try:
        import uvicorn

        from amdkv.serve.app import create_app
    except ImportError as exc:
        raise AmdkvError(f"amdkv serve needs FastAPI and uvicorn ({exc})", hint="pip install 'amdkv[serve]'") from None
    from amdkv.config import VerifierConfig
    from amdkv.tasks.suites import load_suite
    from amdkv.verify.scheduler import open_verifier

    os.environ.pop(TOKEN_ENV, None)
    environ = dict(os.environ, **({"AMDKV_GPUS": gpus} if gpus else {}))
    config = VerifierConfig.from_env(environ, **config_overrides)
    tasks = load_suite(suite)
    verifier = open_verifier(config)
    try:
        service = VerificationService(verifier, tasks, settings, suite_spec=suite)
        uv_config = uvicorn.Config(create_app(service), host=settings.host, port=settings.port, log_level=log_level,
                                   access_log=access_log, timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S)
        try:
            sock = uv_config.bind_socket()
        except SystemExit:
            raise InfrastructureError(f"cannot listen on {settings.host}:{settings.port} (uvicorn's message above)",
                                      hint="is the port taken? choose another --port, or --port 0 for any free one") from None
        print(startup_line(service, settings.host, sock.getsockname()[1]), file=sys.stderr, flush=True)
        uvicorn.Server(uv_config).run(sockets=[sock])
    finally:
        verifier.close()


def startup_line(service: VerificationService, host: str, port: int) -> str:
    v = service.verifier
    shown = f"[{host}]" if ":" in host else host
    devices = ", ".join(f"{d['index']} {d['name']}" for d in service.devices())
    auth = "bearer token" if service.settings.token else "none (loopback only)"
    return (f"amdkv serve ({PROTOCOL}): http://{shown}:{port} | platform {v.platform.name} | devices: {devices} | "
            f"jobs {v.config.jobs} | {len(service.tasks)} tasks from {service.suite_spec} "
            f"(suite {service.suite_version}) | queue {service.settings.max_queue} | auth: {auth}"
            + (" | /evaluate open" if service.settings.evaluate_open else "")
            + ("" if service.settings.allow_task_source else " | task_source off"))


@contextlib.contextmanager
def serve_in_background(service: VerificationService, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve `service` from a thread of this process (uvicorn, real sockets) and yield its URL;
    stops the server (not the service) on exit. For notebooks and tests; `amdkv serve` runs in
    the foreground instead."""
    import uvicorn

    from amdkv.serve.app import create_app

    config = uvicorn.Config(create_app(service), host=host, port=port, log_level="warning", access_log=False)
    sock = config.bind_socket()
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="amdkv-serve", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise InfrastructureError("the in-process server did not start", hint="see uvicorn's log above")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=GRACEFUL_SHUTDOWN_S + 5)
        sock.close()


class ServeProcess:
    """`amdkv serve ARGS` in a child process of its own session: `start()` waits for its startup
    line and reads the URL from it (so `--port 0` works), `stop()` ends it with SIGTERM (then
    SIGKILL), `kill()` is `kill -9` of the service process alone (what a crash looks like to
    clients). Its output goes to `log_path`. Used by benchmarks/serve_vs_inprocess.py and tests."""

    STARTUP_PREFIX = "amdkv serve ("

    def __init__(self, *args: str, log_path: str | os.PathLike[str], env: dict[str, str] | None = None,
                 startup_timeout_s: float = 600.0) -> None:
        self.args = list(args)
        self.log_path = Path(log_path)
        self.env = env
        self.startup_timeout_s = startup_timeout_s
        self.proc: subprocess.Popen | None = None
        self.url: str | None = None

    def start(self) -> "ServeProcess":
        from amdkv.verify.sandbox import with_package_on_path

        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        start_at = self.log_path.stat().st_size if self.log_path.exists() else 0
        env = with_package_on_path(self.env if self.env is not None else os.environ)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "amdkv.cli", "serve", *self.args], stdout=log,
                                         stderr=log, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        deadline = time.monotonic() + self.startup_timeout_s
        while self.url is None:
            text = self.log_path.read_bytes()[start_at:].decode(errors="replace")
            line = next((ln for ln in text.splitlines() if ln.startswith(self.STARTUP_PREFIX)), None)
            if line is not None:
                self.url = line.split(": ", 1)[1].split(" ", 1)[0]
            elif self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise InfrastructureError(f"`amdkv serve {' '.join(self.args)}` did not start: {text[-2000:]}",
                                          hint=f"its log: {self.log_path}")
            else:
                time.sleep(0.1)
        return self

    @property
    def port(self) -> int:
        return int((self.url or "").rsplit(":", 1)[1])

    def kill(self) -> None:
        """SIGKILL the service process itself (its workers notice their parent is gone)."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM (graceful: uvicorn finishes, the verifier closes), SIGKILL if it takes too long;
        then anything left in the service's process group."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is already empty
            os.killpg(self.proc.pid, signal.SIGKILL)

    def __enter__(self) -> "ServeProcess":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
