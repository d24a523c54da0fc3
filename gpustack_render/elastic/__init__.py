"""Elastic EP width changes (docs/contract/elastic-ep.md §4–§5, D29): the records, the layers, the
state machine and the ``ElasticResize`` condition, as pure functions over facts the controller
fetches. Nothing here performs I/O: the controller reads the Pods, Workloads, Nodes, the Ray
head's state API and the engine's answers, calls :func:`~gpustack_render.elastic.machine.decide`,
and writes or calls exactly what the decision says (docs/elastic-ep.md, "Width changes").
"""
