"""pyproject.toml ships what the code needs: every folder of modules as a package, every
file it reads at run time as package data, and dependency ranges that the checked-in
stubs accept. (.ci/run builds the wheel and runs it in a fresh venv outside the checkout,
and imports the stubs with the lowest versions declared.)"""
import fnmatch
import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
PACKAGE_DIR = SETUPTOOLS["package-dir"]
#: files in a package folder that the installed package never reads, and why
NOT_SHIPPED = {
    "tools/gen_protos.sh": "regenerates protocol/proto/ and tools/rmsim/proto/ in a checkout (the dev extra)",
}


def _source_files():
    for package, folder in PACKAGE_DIR.items():
        if folder == ".":
            yield package, ROOT / "__main__.py"
            continue
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                yield package, path


def _owner(path: Path) -> str:
    """The package whose folder holds ``path`` most closely."""
    folder = path.parent.relative_to(ROOT).as_posix()
    while folder not in PACKAGE_DIR.values():
        folder = folder.rpartition("/")[0] or "."
    return next(package for package, mapped in PACKAGE_DIR.items() if mapped == folder)


def test_every_folder_of_modules_is_a_package_mapped_to_it():
    folders = {p.parent.relative_to(ROOT).as_posix() for _, p in _source_files() if p.suffix == ".py"}
    assert folders == set(PACKAGE_DIR.values())
    assert sorted(SETUPTOOLS["packages"]) == sorted(PACKAGE_DIR)


@pytest.mark.parametrize("package, folder", [(p, f) for p, f in PACKAGE_DIR.items() if f != "."])
def test_a_package_folder_is_named_after_its_package(package, folder):
    assert package.removeprefix("gangmaster.").split(".") == folder.split("/")


def test_every_data_file_is_package_data():
    data = SETUPTOOLS["package-data"]
    missing = []
    for _, path in set(_source_files()):
        relative = path.relative_to(ROOT).as_posix()
        if path.suffix == ".py" or relative in NOT_SHIPPED:
            continue
        package = _owner(path)
        inside = path.relative_to(ROOT / PACKAGE_DIR[package]).as_posix()
        if not any(fnmatch.fnmatch(inside, pattern) and inside.count("/") == pattern.count("/")
                   for pattern in data.get(package, [])):
            missing.append(relative)
    assert not missing, f"not in [tool.setuptools.package-data]: {missing}"


def test_selectors_stays_without_init_py_in_the_mapping():
    assert PACKAGE_DIR["gangmaster.selectors"] == "selectors"
    assert not (ROOT / "selectors" / "__init__.py").exists()


def _lower_bound(requirement: str) -> tuple[int, ...]:
    name = re.match(r"[A-Za-z0-9_.-]+", requirement).group()
    spec = next(r for r in PYPROJECT["project"]["dependencies"] if re.match(rf"{name}\b", r))
    return tuple(int(n) for n in re.search(r">=([\d.]+)", spec).group(1).split("."))


STUBS = sorted({*ROOT.glob("protocol/proto/*_pb2.py"), *ROOT.glob("tools/rmsim/proto/*_pb2.py"),
                *ROOT.glob("tools/yarn/proto/*_pb2.py")})
GRPC_STUBS = sorted({*ROOT.glob("protocol/proto/*_pb2_grpc.py"), *ROOT.glob("tools/rmsim/proto/*_pb2_grpc.py"),
                     *ROOT.glob("tools/yarn/proto/*_pb2_grpc.py")})


@pytest.mark.parametrize("stub", STUBS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_protobuf_lower_bound_is_the_stubs_gencode_version(stub):
    # The gencode refuses a runtime older than itself: the declared lower bound is exactly it.
    found = re.search(r"ValidateProtobufRuntimeVersion\(\s*_runtime_version\.Domain\.PUBLIC,"
                      r"\s*(\d+),\s*(\d+),\s*(\d+),", stub.read_text())
    assert found, f"{stub.name}: no protobuf version check"
    assert _lower_bound("protobuf") == tuple(int(n) for n in found.groups())


@pytest.mark.parametrize("stub", GRPC_STUBS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_grpcio_lower_bound_is_the_stubs_generated_version(stub):
    found = re.search(r"GRPC_GENERATED_VERSION = '([\d.]+)'", stub.read_text())
    assert found, f"{stub.name}: no GRPC_GENERATED_VERSION"
    assert _lower_bound("grpcio") == tuple(int(n) for n in found.group(1).split("."))
