"""The controller's pure half: what a reconcile pass observed, the rollout plan, status, events,
claims and the joint admission check. The controller fetches, calls these, and applies."""
