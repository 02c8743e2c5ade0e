"""The broker harness behind ``integration/brokers.sh``, moving into a typed Python package.

- :mod:`.config`: targets, paths, ports and node names with their ``STREAMWIRE_<TARGET>_<KEY>``
  overrides (validated), readiness timeouts;
- :mod:`.envfile`: ``.brokers/<name>.env`` and ``.brokers/<name>.unavailable``;
- :mod:`.readiness`: TCP probes and the poll loop that gives up early when the process died;
- :mod:`.procs`: pid files, detached (``setsid``) starts, stop with a grace period, processes
  found by their root directory or environment;
- :mod:`.mounts`: bind-mount bookkeeping of the chroots and deleting a tree without following
  a mount;
- :mod:`.tls`: the throwaway PKI of the TLS listeners.
"""
