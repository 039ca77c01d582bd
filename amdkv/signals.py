"""Stopping a long command cleanly on SIGTERM or SIGINT (`amdkv gen`, `amdkv eval`).

Why: both commands are resumable, but a kill (a batch scheduler's time limit, a benchmark call's
limit, Ctrl-C) lost the summary, the metrics and the reports of everything done so far, and the
verification in flight held a plain exit for as long as it ran (`close()` waits for it). With
these, the first signal sets an event: the command stops starting work, its verifier is cancelled
(`BaseVerifier.cancel()`: running workers killed, nothing waited for, what they return is
`infra_error` / `verifier_closed`, which a re-run verifies again), and the command writes its
outputs over what it finished. A second signal acts as it would have without the handler.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from typing import Any, Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def stop_on_signals(stop: threading.Event, command: str, signals: tuple[int, ...] = STOP_SIGNALS) -> Iterator[None]:
    """While inside: the first of `signals` sets `stop` and says so on stderr; a second one is handled
    as before (Ctrl-C twice still kills). Main thread only (Python's rule for signal handlers);
    elsewhere it does nothing. The handler only sets the event: the interrupted thread may hold a
    lock that stopping needs, so the stopping itself happens elsewhere (`cancel_on_stop`, a loop)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in signals}

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set():  # the second signal: what it would have done
            signal.signal(signum, previous[signum])
            signal.raise_signal(signum)
            return
        stop.set()
        print(f"{command}: {signal.Signals(signum).name}: stopping; what is finished is kept, a re-run continues "
              "(send it again to stop at once)", file=sys.stderr, flush=True)

    for sig in signals:
        signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def cancel_on_stop(stop: threading.Event | None, verifier: Any) -> Iterator[None]:
    """While inside: once `stop` is set, `verifier.cancel()` runs in a thread of its own (never in
    the signal handler, see above). Leave this before closing the verifier."""
    if stop is None:
        yield
        return
    left = threading.Event()

    def watch() -> None:
        while not left.is_set():
            if stop.wait(0.2):
                if not left.is_set():
                    verifier.cancel()
                return

    watcher = threading.Thread(target=watch, daemon=True, name="amdkv-cancel-on-stop")
    watcher.start()
    try:
        yield
    finally:
        left.set()
        watcher.join(timeout=30)
