"""One module per verb of ``gpustack-render``, each with ``run(args, out, err) -> int``.

A verb imports the shared helpers of ``gpustack_render.cli`` and the library layers it needs,
never another verb; only the entry point (``gpustack_render.cli.__main__``) imports a verb, and
only the one called, so a verb's start-up carries no other verb's imports. An import-linter
contract in pyproject.toml holds both.
"""
