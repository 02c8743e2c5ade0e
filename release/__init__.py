"""Release tooling: the artefacts ``make dist`` builds (:mod:`release.dist`) and the
interpreter matrix ``make matrix`` runs them through (:mod:`release.matrix`). Standard library
only; docs/development.md, "Release artefacts" and "CI"."""
