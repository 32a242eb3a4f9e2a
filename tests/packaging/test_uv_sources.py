"""scripts/uv_sources.py: where the machine's pip installs from, as the uv options setup.sh
passes, with pip's own order of preference between the places a setting can come from."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "uv_sources.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("uv_sources", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


uv_sources = load()
# what `pip config list` prints for a config with values in every place (pip 23 to 26)
LISTED = """\
:env:.find-links='/from/env'
global.cert='/ca/bundle.pem'
global.extra-index-url='file:///mirror/one file:///mirror/two'
global.find-links='\\n/wheels/one\\n/wheels/two'
global.index-url='https://global.example/simple'
global.no-index='true'
install.index-url='https://install.example/simple'
install.trusted-host="it's.example"
"""


def test_pip_config_becomes_uv_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    options = uv_sources.uv_arguments(uv_sources.preferred(LISTED))
    assert options[:2] == ["--index-strategy", "unsafe-best-match"]
    # one index, the [install] section's (pip prefers it to [global]); the variable's wheel
    # folder over the file's; every extra index; the trusted host; the CA bundle last
    assert options[2:] == [
        *("--index-url", "https://install.example/simple"),
        *("--find-links", "/from/env"),
        *("--extra-index-url", "file:///mirror/one", "--extra-index-url", "file:///mirror/two"),
        *("--allow-insecure-host", "it's.example", "--no-index"),
        *("--cert", "/ca/bundle.pem"),
    ]
    # a CA bundle already given to uv stays
    monkeypatch.setenv("SSL_CERT_FILE", "/other.pem")
    assert "--cert" not in uv_sources.uv_arguments(uv_sources.preferred(LISTED))


def test_several_wheel_folders_on_several_lines() -> None:
    config = uv_sources.preferred("global.find-links='\\n/a\\n/b'\n")
    assert uv_sources.uv_arguments(config)[2:] == ["--find-links", "/a", "--find-links", "/b"]


def test_the_script_prints_nul_separated_options() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, check=True)
    assert done.stdout.startswith("--index-strategy\0unsafe-best-match\0")
    assert done.stdout.endswith("\0")
