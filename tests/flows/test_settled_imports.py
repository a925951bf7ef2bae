"""trainspotter.tasks spares a flow process the collector's walks over what its imports
built (settled_imports) and over everything at exit (freeze_at_exit); issue 38 item 7."""

import gc
import os
import subprocess
import sys

import pytest

from trainspotter.tasks import settled_imports


@pytest.fixture(autouse=True)
def _collector_as_it_was():
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    (gc.enable if enabled else gc.disable)()


def test_the_collector_is_paused_in_the_block_and_what_it_built_is_frozen():
    gc.unfreeze()
    with settled_imports():
        assert not gc.isenabled()
        built = [[] for _ in range(1000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(built)


def test_an_exception_freezes_nothing_and_restores_the_collector():
    gc.unfreeze()
    with pytest.raises(ImportError), settled_imports():
        import trainspotter_no_such_module  # noqa: F401
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_disabled_collector_stays_disabled():
    gc.disable()
    with settled_imports():
        pass
    assert not gc.isenabled()


def test_everything_is_frozen_at_exit_after_the_handlers_registered_later(tmp_path):
    code = ("import atexit, gc\n"
            "atexit.register(lambda: print('last handler sees frozen objects:', gc.get_freeze_count() > 0))\n"
            "import trainspotter.tasks\n"
            "atexit.register(lambda: print('later handler sees frozen objects:', gc.get_freeze_count() > 0))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=os.environ | {"TRAINSPOTTER_ARTIFACTS": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["later handler sees frozen objects: False",
                                       "last handler sees frozen objects: True"]
