"""A LocalStack Lambda executor that runs provided.* bootstraps as host processes.

LocalStack's community Lambda runtime has one executor, Docker: each execution
environment is a container of the runtime's image with LocalStack's init
binary in front of the function. Neither the image nor the init binary can be
fetched on a machine without Docker and GitHub access. This package is a
second executor (entry-point namespace ``localstack.lambda.runtime_executor``,
name ``process``): each execution environment is the function's own
``bootstrap`` started as a process on the host, in the function's unzipped
code directory, with the environment LocalStack computed for it, talking to a
Lambda Runtime API that the executor serves on 127.0.0.1.

Select it with ``LAMBDA_RUNTIME_EXECUTOR=process``.
"""
