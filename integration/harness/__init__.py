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
- :mod:`.lanes`: the single-process brokers (NATS with its TLS server, Liftbridge, Iggy);
- :mod:`.rabbit`: RabbitMQ 4.x in Debian chroots (``rabbitmq``, ``rabbitmq40``);
- :mod:`.cluster`: the three-node ``rabbitmq-cluster``;
- :mod:`.rabbit310`: RabbitMQ 3.10 on the host (``rabbitmq310``);
- :mod:`.docker`: the Docker backend (``docker-compose.yml``);
- :mod:`.cli`: the verbs, the lock, the backend choice and the dispatch.
"""
