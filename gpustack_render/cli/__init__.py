"""The ``gpustack-render`` command line: the library's own shell. Unlike the layers below it,
it reads files and standard input and writes standard output.

``__main__`` is the entry point; ``parser`` builds the verbs' flags; ``verbs/`` holds one module
per verb; the verbs share ``exits`` (exit codes, ``UsageError``), ``operands`` (input files into
deployments), ``reviews`` (admission requests and answers) and ``output`` (writing objects);
``sources``, ``documents``, ``yamlio`` and ``yamlread`` read the files, ``live`` reads a cluster
for ``explain``.
"""
