"""The plugin LocalStack finds through the entry point (pyproject.toml)."""

from localstack.services.lambda_.invocation.plugins import RuntimeExecutorPlugin


class ProcessRuntimeExecutorPlugin(RuntimeExecutorPlugin):
    name = "process"

    def load(self, *args, **kwargs):
        from sas_localstack_lambda.executor import ProcessRuntimeExecutor

        return ProcessRuntimeExecutor
