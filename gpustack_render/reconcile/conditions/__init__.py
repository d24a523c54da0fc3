"""The conditions of ``ModelDeployment.status`` (docs/contract/controller.md §14), one module per
family: ``common`` (the condition types in status order, the verdict, ``lastTransitionTime``
carried over, the message bound), ``kvcache`` (``DomainRegistered``, ``CacheAttached``),
``quota`` (``QuotaReserved``), ``serving`` (``ReplicasUpToDate``, ``RoleKindsReady``),
``router`` (``KVEventsPublishing``, ``RouterReady``) and ``readiness`` (the summary conditions
``Ready``, ``Reconciling``, ``Stalled`` computed from the eight)."""
