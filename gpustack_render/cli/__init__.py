"""The ``gpustack-render`` command line: the library's own shell. Unlike the layers below it,
it reads files and standard input and writes standard output."""
