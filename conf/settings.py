"""Settings: ``conf/defaults.yaml`` with an optional override file on top.

The defaults file lists every knob; an override may only name knobs that exist
there, so a typo is an error (file, field, the known fields) rather than a
silently ignored line. Each section is typed by the module that owns it (e.g.
``gangmaster.selectors.settings``) from the merged :class:`Fields`.
"""
from __future__ import annotations

from pathlib import Path

from . import conf_path
from .fields import ConfigError, Fields, load_yaml

DEFAULTS = "defaults.yaml"


class Settings:
    """Merged configuration, one :class:`Fields` per top-level section."""

    def __init__(self, override: str | Path | None = None):
        defaults_path = conf_path(DEFAULTS)
        defaults = Fields(load_yaml(defaults_path), str(defaults_path))
        merged = {name: dict(defaults.mapping(name).data) for name in defaults.keys()}
        self.sources = {name: str(defaults_path) for name in merged}
        if override is not None:
            doc = Fields(load_yaml(override), str(override))
            doc.reject_unknown(merged)
            for name in doc.keys():
                section = doc.mapping(name)
                section.reject_unknown(merged[name])
                merged[name].update(section.data)
                self.sources[name] = str(override)
        self._sections = merged

    def section(self, name: str) -> Fields:
        if name not in self._sections:
            raise ConfigError(str(conf_path(DEFAULTS)), name, "a section of the defaults file")
        return Fields(self._sections[name], self.sources[name], name)
