"""The engine is usable as a library: importing every core module pulls in no UI framework."""
import subprocess
import sys


def test_core_imports_no_ui_framework() -> None:
    code = (
        "import pkgutil, importlib, sys, core\n"
        "for m in pkgutil.walk_packages(core.__path__, 'core.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(n for n in ('textual', 'typer', 'crewlet_tui', 'click') if n in sys.modules)\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"core imported UI modules: {out.stdout.strip()}"
