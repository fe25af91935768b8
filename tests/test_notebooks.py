"""Every notebook in examples/ runs top to bottom with nbclient in its short mode (the cell
tagged "parameters" gets ``SHORT = True``) and asserts its result in a cell; notebooks are
stored without outputs."""

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NOTEBOOKS = sorted(EXAMPLES.glob("*.ipynb"))


def test_there_is_a_notebook():
    assert [p.name for p in NOTEBOOKS] == ["soft_robot_calibration.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(not cell.outputs and cell.execution_count is None for cell in code)
    assert sum("parameters" in cell.metadata.get("tags", []) for cell in code) == 1


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_in_short_mode(path, tmp_path):
    notebook = nbformat.read(path, as_version=4)
    parameters = next(cell for cell in notebook.cells if "parameters" in cell.metadata.get("tags", []))
    parameters.source += f"\nSHORT = True\nOUT = {str(tmp_path)!r}\n"
    client = nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    printed = "".join(out.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                      for out in cell.outputs)
    assert "checks passed" in printed
    for name in ("history.png", "markers.png", "calibration.usd"):
        assert (tmp_path / name).stat().st_size > 1000, name
