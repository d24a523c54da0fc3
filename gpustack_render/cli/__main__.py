"""``python -m gpustack_render.cli``."""

from gpustack_render.cli.commands import main

if __name__ == "__main__":
    raise SystemExit(main())
