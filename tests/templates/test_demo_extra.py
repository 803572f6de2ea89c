"""`make demo` installs only the `demo` extra: it must hold what the calc template asks for."""

from importlib.metadata import requires

from packaging.requirements import Requirement

from rltune.templates import TEMPLATES_DIR


def test_the_demo_extra_names_every_requirement_of_the_calc_template():
    declared = [Requirement(r) for r in requires("rltune") or []]
    demo = {r.name for r in declared if r.marker and r.marker.evaluate({"extra": "demo"})}
    lines = (TEMPLATES_DIR / "calc" / "requirements.txt").read_text().splitlines()
    wanted = {Requirement(x).name for x in lines if x.strip() and not x.startswith("#")}
    assert wanted and wanted <= demo, sorted(wanted - demo)
