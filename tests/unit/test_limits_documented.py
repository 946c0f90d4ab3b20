"""Every limit in conf/limits.py is in the README's *Limits* table, with its value, so
the documented limits are the enforced ones."""
import re
from pathlib import Path

import gangmaster.conf.limits as limits

README = Path(__file__).resolve().parents[2] / "README.md"


def shown(name: str, value: float) -> str:
    """How the README writes a limit's value: bytes in binary units, seconds with s."""
    if isinstance(value, tuple):
        return "..".join(f"{v:,}" for v in value)
    if "_BYTES" in name:
        for unit, size in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
            if value >= size and value % size == 0:
                return f"{value // size:,} {unit}"
        return f"{value:,} bytes"
    if name.endswith("_S"):
        return f"{int(value):,} s" if float(value).is_integer() else f"{value:g} s"
    return f"{value:,}"


def limit_names() -> list[str]:
    return sorted(n for n in vars(limits) if re.fullmatch(r"[A-Z][A-Z0-9_]+", n) and n != "MiB")


def limits_section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("\n## Limits\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def test_every_limit_is_in_the_readme_with_its_value():
    section = limits_section()
    rows = {m.group(1): m.group(2).strip()
            for m in re.finditer(r"^\| `([A-Z0-9_]+)` \| ([^|]+) \|", section, re.MULTILINE)}
    for name in limit_names():
        assert name in rows, f"conf/limits.py {name} is missing from README.md's Limits table"
        assert rows[name] == shown(name, getattr(limits, name)), name
    assert set(rows) <= set(limit_names()), "README lists a limit conf/limits.py does not have"
