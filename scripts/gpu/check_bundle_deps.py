"""Check the GPU bundle's pins and wheels: one version per package, and every dependency met.

    python scripts/gpu/check_bundle_deps.py                 # the pin list only (no network)
    python scripts/gpu/check_bundle_deps.py --wheels DIR    # also the downloaded wheels

With ``--wheels`` each wheel's ``Requires-Dist`` (markers evaluated for CPython 3.12 on Linux
x86_64, requested extras followed) must be met by another carried wheel (name and version)
or by a package the GPU image already has (DEVICE_PACKAGES; version checked where known).
Exit status 1 on any problem, with one line per problem.
"""
import argparse
import re
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

HERE = Path(__file__).resolve().parent
PINS = HERE / "bundle_requirements.txt"
# Environment of the GPU machine's python3 (/opt/torch/.venv/bin/python3).
TARGET_ENV = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
}
# Packages the GPU image already has that the carried wheels need (from
# /work/.library/device/KINDS.md, "Python packages already there"; versions where a session
# read them, else None = any). Everything else must be carried.
DEVICE_PACKAGES = {
    "numpy": "2.5.2",
    "torch": "2.11.0",
    "cupy-cuda13x": "14.2.0",
    "safetensors": "0.8.0",
    "setuptools": None,
    "wheel": None,
    "packaging": None,
    "requests": None,
    "httpx": None,
    "jinja2": None,
    "tqdm": None,
    "regex": None,
    "pyyaml": None,
    "filelock": None,
    "fsspec": None,
    "hf-xet": None,
    "wrapt": None,
    "rich": None,
    "shellingham": None,
    "annotated-doc": None,
    "sympy": None,
    "networkx": None,
}


def read_pins(path: Path = PINS) -> dict:
    """``{canonical name: version}`` from a ``name==version`` file; duplicates raise."""
    pins = {}
    for lineno, raw in enumerate(Path(path).read_text(encoding="utf8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([A-Za-z0-9_.+\-]+)", line)
        if not match:
            raise ValueError(f"{path}:{lineno}: expected name==version, got {raw!r}")
        name = canonicalize_name(match.group(1))
        if name in pins:
            raise ValueError(f"{path}:{lineno}: {name} pinned twice")
        pins[name] = match.group(2)
    return pins


def wheel_requirements(wheel: Path) -> list:
    """The ``Requires-Dist`` lines of a wheel's METADATA."""
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        msg = Parser().parsestr(zf.read(meta).decode("utf8"))
    return msg.get_all("Requires-Dist") or []


def check_wheels(wheel_dir: Path, pins: dict) -> list:
    """Problems with the wheels in ``wheel_dir`` against the pins and the image."""
    problems = []
    wheels = {}
    for wheel in sorted(Path(wheel_dir).glob("*.whl")):
        name, version, _, _ = parse_wheel_filename(wheel.name)
        if name in wheels:
            problems.append(f"two wheels of {name}: {wheels[name][1]} and {version}")
        wheels[name] = (wheel, version)
    for name, version in pins.items():
        if name not in wheels:
            problems.append(f"{name}=={version} pinned but no wheel downloaded")
        elif wheels[name][1] != Version(version):
            problems.append(f"{name}: pinned {version}, wheel is {wheels[name][1]}")
    for name in wheels:
        if name not in pins:
            problems.append(f"{name}: wheel present but not pinned")
    # Follow requirements (and the extras they ask for) from every carried wheel.
    todo = [(name, "") for name in wheels]
    seen = set()
    while todo:
        name, extra = todo.pop()
        if (name, extra) in seen or name not in wheels:
            continue
        seen.add((name, extra))
        for line in wheel_requirements(wheels[name][0]):
            req = Requirement(line)
            if req.marker and not req.marker.evaluate({**TARGET_ENV, "extra": extra}):
                continue
            dep = canonicalize_name(req.name)
            if dep in wheels:
                if not req.specifier.contains(wheels[dep][1], prereleases=True):
                    problems.append(f"{name} needs {req}, carried {dep} {wheels[dep][1]}")
                todo.extend((dep, e) for e in req.extras)
                todo.append((dep, ""))
            elif dep in DEVICE_PACKAGES:
                have = DEVICE_PACKAGES[dep]
                if have and not req.specifier.contains(have, prereleases=True):
                    problems.append(f"{name} needs {req}, the image has {dep} {have}: carry it")
            else:
                problems.append(f"{name} needs {req}: neither carried nor in the image")
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pins", type=Path, default=PINS)
    parser.add_argument("--wheels", type=Path, default=None, help="Folder of downloaded wheels")
    args = parser.parse_args(argv)
    try:
        pins = read_pins(args.pins)
    except ValueError as err:
        print(f"ERROR {err}", file=sys.stderr)
        return 1
    problems = check_wheels(args.wheels, pins) if args.wheels else []
    for problem in problems:
        print(f"ERROR {problem}", file=sys.stderr)
    if not problems:
        what = f"{len(pins)} pins" + (f", wheels in {args.wheels}" if args.wheels else "")
        print(f"bundle deps OK: {what}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
