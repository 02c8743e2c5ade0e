"""The broker harness behind ``integration/brokers.sh``, as a typed Python package.

``python -m integration.harness up|down|status|restart|stop|start ...`` is what
``integration/brokers.sh`` runs. The pieces:

- :mod:`.config`: targets, paths, ports and node names with their ``STREAMWIRE_<TARGET>_<KEY>``
  overrides (validated), readiness timeouts;
- :mod:`.envfile`: ``.brokers/<name>.env`` and ``.brokers/<name>.unavailable``;
- :mod:`.readiness`: TCP probes and the poll loop that gives up early when the process died;
- :mod:`.procs`: pid files, detached (``setsid``) starts, stop with a grace period, processes
  found by their root directory or environment;
- :mod:`.mounts`: bind-mount bookkeeping of the chroots and deleting a tree without following
  a mount;
- :mod:`.tls`: the throwaway PKI of the TLS listeners;
- :mod:`.lanes`: the brokers run by Python (NATS, Liftbridge, Iggy);
- :mod:`.cli`: the verbs, the lock, the backend choice and the dispatch; what is not in Python
  yet (the RabbitMQ targets and the Docker backend) runs in ``integration/harness/lanes.sh``.
"""
