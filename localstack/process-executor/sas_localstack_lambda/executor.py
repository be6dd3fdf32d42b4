"""ProcessRuntimeExecutor: one execution environment = one bootstrap process.

LocalStack drives an executor through RuntimeExecutor (its
``services/lambda_/invocation/runtime_executor.py``): ``prepare_version``
once per function version, then per execution environment ``start`` (with
the environment variables it computed: credentials, region, the function's
own variables, ``AWS_ENDPOINT_URL`` built from ``get_endpoint_from_executor``),
``invoke`` for each event (one at a time), and ``stop``.

Here ``start`` serves a Runtime API on 127.0.0.1 and starts the function's
``bootstrap`` from its unzipped code directory with that environment, and
returns once the bootstrap asks for its first event. ``invoke`` hands the
event over and waits for the answer, at most the function's timeout; a
bootstrap that times out or exits is replaced by a fresh one (as Lambda resets
an environment), and the invocation fails with the error Lambda reports.

The processes inherit LocalStack's process group, so stopping LocalStack's
group stops every bootstrap with it.
"""

import json
import logging
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from collections import deque
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

from localstack import config
from localstack.aws.api.lambda_ import PackageType
from localstack.services.lambda_.invocation.lambda_models import FunctionVersion, InvocationResult
from localstack.services.lambda_.invocation.runtime_executor import (
    LambdaRuntimeException,
    RuntimeExecutor,
)

from sas_localstack_lambda.runtime_api import Event, RuntimeAPI

LOG = logging.getLogger(__name__)

# The PATH of a provided.al2023 environment. The host's libraries serve in
# place of the image's: a statically linked bootstrap (Go with
# CGO_ENABLED=0) needs none.
LAMBDA_PATH = "/usr/local/bin:/usr/bin:/bin"
# The lines of output kept per environment for get_logs.
MAX_LOG_LINES = 2000
# How long a stopping bootstrap gets between SIGTERM and SIGKILL.
STOP_GRACE_SECONDS = 2


def _is_provided(runtime: str | None) -> bool:
    return bool(runtime) and runtime.startswith("provided")


class ProcessRuntimeExecutor(RuntimeExecutor):
    def __init__(self, id: str, function_version: FunctionVersion) -> None:
        super().__init__(id=id, function_version=function_version)
        self.name = f"{function_version.id.function_name}:{id[:8]}"
        self._env: dict[str, str] = {}
        self._api: RuntimeAPI | None = None
        self._proc: subprocess.Popen | None = None
        self._tmp: Path | None = None
        self._lines: deque[str] = deque(maxlen=MAX_LOG_LINES)
        self._line_count = 0  # lines ever read, to cut an invocation's own
        self._lines_lock = threading.Lock()
        self._stopped = False

    # --- the function version ---

    @classmethod
    def prepare_version(cls, function_version: FunctionVersion) -> None:
        cfg = function_version.config
        if cfg.package_type != PackageType.Zip or not _is_provided(cfg.runtime):
            raise LambdaRuntimeException(
                f"the process executor runs zip functions on a provided.* runtime only; "
                f"{function_version.id.function_name} is {cfg.package_type} {cfg.runtime}"
            )
        if cfg.layers:
            LOG.warning(
                "%s has layers; the process executor does not mount them (/opt is the host's)",
                function_version.id.function_name,
            )
        if cfg.code:
            cfg.code.prepare_for_execution()

    @classmethod
    def cleanup_version(cls, function_version: FunctionVersion) -> None:
        pass  # LocalStack removes the unzipped code itself

    @classmethod
    def validate_environment(cls) -> bool:
        return True

    # --- addresses: everything is on the host ---

    def get_address(self) -> str:
        return "127.0.0.1"

    def get_endpoint_from_executor(self) -> str:
        return "127.0.0.1"

    def get_runtime_endpoint(self) -> str:
        return f"http://127.0.0.1:{config.GATEWAY_LISTEN[0].port}/_localstack_lambda/{self.id}"

    # --- the environment ---

    def _code_dir(self) -> Path:
        code = self.function_version.config.code
        if code is None:
            raise LambdaRuntimeException(f"{self.name}: no code")
        return Path(code.get_unzipped_code_location())

    def start(self, env_vars: dict[str, str]) -> None:
        self._env = {k: str(v) for k, v in env_vars.items() if v is not None}
        self._tmp = Path(tempfile.mkdtemp(prefix=f"lambda-{self.id[:8]}-"))
        self._spawn()

    def _spawn(self) -> None:
        code_dir = self._code_dir()
        bootstrap = code_dir / "bootstrap"
        if not bootstrap.is_file():
            raise LambdaRuntimeException(f"{self.name}: no bootstrap in {code_dir}")
        mode = bootstrap.stat().st_mode
        if not mode & stat.S_IXUSR:  # zips do not always keep the mode
            bootstrap.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)

        api = RuntimeAPI(self.name)
        api.start()
        env = dict(self._env)
        env.update(
            AWS_LAMBDA_RUNTIME_API=api.address,
            LAMBDA_TASK_ROOT=str(code_dir),
            PATH=LAMBDA_PATH,
            TMPDIR=str(self._tmp),
        )
        proc = subprocess.Popen(
            [str(bootstrap)],
            cwd=code_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        self._api, self._proc = api, proc
        threading.Thread(target=self._pump, args=(proc,), name=f"lambda-out-{self.name}", daemon=True).start()
        LOG.info("lambda %s: started %s (pid %d), runtime API %s", self.name, bootstrap, proc.pid, api.address)

        deadline = time.monotonic() + config.LAMBDA_RUNTIME_ENVIRONMENT_TIMEOUT
        while not api.ready.wait(0.05):
            if api.init_error is not None:
                self._kill()
                raise LambdaRuntimeException(f"{self.name}: init error: {api.init_error.decode(errors='replace')}")
            if proc.poll() is not None:
                self._kill()
                raise LambdaRuntimeException(
                    f"{self.name}: bootstrap exited with {proc.returncode} before asking for an event; output:\n{self.get_logs()}"
                )
            if time.monotonic() > deadline:
                self._kill()
                raise LambdaRuntimeException(f"{self.name}: bootstrap did not ask for an event within "
                                             f"{config.LAMBDA_RUNTIME_ENVIRONMENT_TIMEOUT}s")

    def _pump(self, proc: subprocess.Popen) -> None:
        for raw in proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            with self._lines_lock:
                self._lines.append(line)
                self._line_count += 1
            LOG.info("[%s] %s", self.name, line)

    def _output_since(self, mark: int) -> str:
        with self._lines_lock:
            n = min(self._line_count - mark, len(self._lines))
            return "\n".join(list(self._lines)[len(self._lines) - n:]) + ("\n" if n else "")

    def invoke(self, payload: dict[str, str]) -> InvocationResult:
        request_id = payload["invoke-id"]
        if self._proc is None or self._proc.poll() is not None:
            self._kill()
            self._spawn()
        timeout = float(self.function_version.config.timeout or 3)
        with self._lines_lock:
            mark = self._line_count
        # stop() may run meanwhile (LocalStack shutting down): hold our own
        # references.
        api, proc = self._api, self._proc
        fut = api.submit(Event(
            request_id=request_id,
            payload=str(payload.get("payload") or "").encode(),
            function_arn=payload.get("invoked-function-arn", ""),
            deadline_ms=int((time.time() + timeout) * 1000),
            trace_id=payload.get("trace-id"),
        ))
        deadline = time.monotonic() + timeout
        failure = None
        while True:
            try:
                outcome = fut.result(timeout=0.1)
                return InvocationResult(request_id, outcome.payload, is_error=outcome.is_error,
                                        logs=self._output_since(mark))
            except FutureTimeout:
                pass
            if proc.poll() is not None:
                failure = ("Runtime.ExitError",
                           f"RequestId: {request_id} Error: Runtime exited with error: exit status {proc.returncode}")
                break
            if time.monotonic() > deadline:
                failure = ("Sandbox.Timedout", f"RequestId: {request_id} Error: Task timed out after {timeout:.2f} seconds")
                break
        # Lambda resets the environment after a timeout or a crash.
        api.forget(request_id)
        LOG.warning("lambda %s: %s; starting a fresh bootstrap", self.name, failure[1])
        logs = self._output_since(mark)
        self._kill()
        if not self._stopped:
            self._spawn()
        body = json.dumps({"errorType": failure[0], "errorMessage": failure[1]}).encode()
        return InvocationResult(request_id, body, is_error=True, logs=logs)

    def _kill(self) -> None:
        proc, api = self._proc, self._api
        self._proc = self._api = None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if api is not None:
            api.stop()

    def stop(self) -> None:
        self._stopped = True
        self._kill()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def get_logs(self) -> str:
        with self._lines_lock:
            return "\n".join(self._lines)
