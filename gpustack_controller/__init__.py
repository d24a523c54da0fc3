"""gpustack_controller: the asyncio controller that watches, renders with gpustack_render, and applies."""
