"""What an edit, an upgrade or a stuck rollout will do, and why (docs/explain.md).

A pure layer above admission and reconcile: it asks admission for the verdict, the renderer for
what each Pod would become, and the rollout planner for what the controller does next. The
command line's ``explain`` verb (and its live mode, which reads a cluster) is a shell over it.
"""
