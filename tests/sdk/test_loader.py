"""The classpath loader: three forms, and errors that name the file, class and fix."""

import textwrap

import pytest

from rltune.sdk import AbstractRolloutProcessor, load_processor_class, parse_classpath
from rltune.sdk.errors import UserCodeError

GOOD = """
from rltune.sdk import AbstractRolloutProcessor, RolloutOutput

class Echo(AbstractRolloutProcessor):
    async def process(self, input_data):
        return RolloutOutput()

class NotAProcessor:
    pass
"""


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    # Package names are unique per test: imported packages stay cached in sys.modules.
    top = f"fn_{tmp_path.name}"
    pkg = tmp_path / top / "rollout"
    pkg.mkdir(parents=True)
    (tmp_path / top / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "echo.py").write_text(GOOD)
    (tmp_path / "broken.py").write_text("import json\nraise ValueError('boom in user code')\n")
    (tmp_path / "needs_pkg.py").write_text("import surely_not_installed_pkg\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_parse_forms():
    assert parse_classpath("a.b.C").module == "a.b"
    assert parse_classpath("a.b:C").module == "a.b"
    cp = parse_classpath("dir/file.py:C")
    assert (cp.file, cp.class_name, cp.module_name) == ("dir/file.py", "C", "dir.file")
    assert parse_classpath("dir/file:C").file == "dir/file.py"
    for bad in ("", "Class", "a.b:", "a.b:1x"):
        with pytest.raises(UserCodeError, match="classpath"):
            parse_classpath(bad)


@pytest.mark.parametrize("form", ["dotted", "colon", "file"])
def test_loads_all_three_forms(workspace, form):
    top = f"fn_{workspace.name}"
    classpath = {
        "dotted": f"{top}.rollout.echo.Echo",
        "colon": f"{top}.rollout.echo:Echo",
        "file": f"{top}/rollout/echo.py:Echo",
    }[form]
    cls = load_processor_class(classpath, workspace)
    assert issubclass(cls, AbstractRolloutProcessor) and cls.__name__ == "Echo"


def test_missing_file_names_it(workspace):
    with pytest.raises(UserCodeError, match=r"file nothere\.py does not exist"):
        load_processor_class("nothere.py:X", workspace)


def test_missing_module_names_it(workspace):
    with pytest.raises(UserCodeError, match=r"module nothere\.mod not found"):
        load_processor_class("nothere.mod.X", workspace)


def test_missing_class_lists_what_exists(workspace):
    with pytest.raises(UserCodeError) as err:
        load_processor_class(f"fn_{workspace.name}/rollout/echo.py:Nope", workspace)
    assert "class Nope not found" in str(err.value) and "['Echo']" in str(err.value)


def test_not_a_processor(workspace):
    with pytest.raises(UserCodeError, match=r"NotAProcessor .* is not a processor"):
        load_processor_class(f"fn_{workspace.name}/rollout/echo.py:NotAProcessor", workspace)


def test_import_error_carries_user_traceback(workspace):
    with pytest.raises(UserCodeError) as err:
        load_processor_class("broken.py:X", workspace)
    text = str(err.value)
    assert "boom in user code" in text and "broken.py" in text and "line 2" in text


def test_missing_dependency_suggests_requirements(workspace):
    with pytest.raises(UserCodeError, match=r"surely_not_installed_pkg.*requirements\.txt"):
        load_processor_class("needs_pkg.py:X", workspace)


def test_loader_source_is_plain(workspace):
    # A module that defines a processor via textwrap to be sure indentation errors are reported.
    (workspace / "indent.py").write_text(textwrap.dedent("def f(:\n  pass\n"))
    with pytest.raises(UserCodeError, match="SyntaxError"):
        load_processor_class("indent.py:X", workspace)
