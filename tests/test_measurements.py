"""Measured trajectories: CSV and NPZ loading, one-line errors naming file, line and column,
resampling onto a simulation grid."""

import numpy as np
import pytest

from wpsim.io.measurements import MeasurementError, load_trajectory, save_trajectory


def write(tmp_path, text: str, name: str = "run.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_csv_round_trip_and_channels(tmp_path):
    time = np.linspace(0.0, 0.4, 5)
    columns = {"q:elbow": np.sin(time), "qd:elbow": np.cos(time), "tau:elbow": time * 2.0,
               "marker:tip:x": time, "marker:tip:y": 2 * time, "marker:tip:z": 3 * time}
    path = save_trajectory(tmp_path / "out" / "run.csv", time, columns)
    data = load_trajectory(path)
    assert data.time.tolist() == time.tolist()
    assert data.names("q") == ["elbow"] and data.names("marker") == ["tip"]
    assert data.channel("q", "elbow").tolist() == np.sin(time).tolist()  # full float precision
    assert data.channel("marker", "tip").shape == (5, 3)
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["run.csv"]  # no temporary file left


def test_npz_loads_like_csv(tmp_path):
    path = tmp_path / "run.npz"
    np.savez(path, time=np.array([0.0, 0.1, 0.2]), **{"q:a": np.array([1.0, 2.0, 3.0])})
    data = load_trajectory(path)
    assert data.channel("q", "a").tolist() == [1.0, 2.0, 3.0]


def test_resample_interpolates_angles_and_holds_torques(tmp_path):
    path = write(tmp_path, "time,q:a,tau:a\n0,0,1\n0.1,1,2\n0.2,3,5\n")
    grid = load_trajectory(path).resample([0.0, 0.05, 0.1, 0.15, 0.2])
    assert grid.channel("q", "a") == pytest.approx([0.0, 0.5, 1.0, 2.0, 3.0])
    assert grid.channel("tau", "a").tolist() == [1.0, 1.0, 2.0, 2.0, 5.0]
    with pytest.raises(MeasurementError, match=r"covers 0-0.2 s, but 0-0.3 s are needed"):
        load_trajectory(path).resample([0.0, 0.3])


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "the file is empty"),
        ("q:a,tau:a\n1,2\n3,4\n", "no 'time' column"),
        ("time,q:a\n0,1\n0.1\n", r"run.csv, line 3: 1 values for 2 columns"),
        ("time,q:a\n0,1\n0.1,abc\n", r"run.csv, line 3, column 'q:a': 'abc' is not a number"),
        ("time,q:a\n0,1\n0.1,nan\n", r"run.csv, line 3, column 'q:a': value nan is not finite"),
        ("time,q:a\n0,1\n0.2,2\n0.1,3\n", r"run.csv, line 4: time 0.1 s is not after the previous sample's 0.2 s"),
        ("time,q:\n0,1\n0.1,2\n", r"column 'q:' is neither 'time' nor 'kind:name'"),
        ("time,angle\n0,1\n0.1,2\n", r"only a time column, no channels \(ignored: angle\)"),
        ("time,marker:tip:w\n0,1\n0.1,2\n", r"marker column 'marker:tip:w' must end in :x, :y or :z"),
        ("time,q:a,q:a\n0,1,1\n0.1,2,2\n", "column 'q:a' appears twice"),
        ("time,q:a\n0,1\n", r"1 sample\(s\); at least 2"),
        ("time\n0\n0.1\n", "only a time column"),
    ],
)
def test_bad_csv_files_name_the_problem(tmp_path, text, message):
    with pytest.raises(MeasurementError, match=message):
        load_trajectory(write(tmp_path, text))


def test_columns_that_are_not_channels_are_ignored_and_listed(tmp_path):
    """Extra columns (a note, another instrument's channel) made the file unusable."""
    path = write(tmp_path, "time,comment,q:a,temperature:motor,comment\n0,start,1,20.5,x\n0.1,,2,n/a,y\n")
    with pytest.warns(UserWarning, match=r"run.csv: ignoring column\(s\) 'comment', 'temperature:motor', 'comment'"):
        data = load_trajectory(path)
    assert data.ignored == ("comment", "temperature:motor", "comment") and list(data.columns) == ["q:a"]
    assert data.channel("q", "a").tolist() == [1.0, 2.0] and data.resample([0.05]).ignored == data.ignored
    npz = tmp_path / "run.npz"
    np.savez(npz, time=np.array([0.0, 0.1]), **{"q:a": np.array([1.0, 2.0]), "notes": np.zeros((2, 2))})
    with pytest.warns(UserWarning, match=r"run.npz: ignoring column\(s\) 'notes'"):
        assert load_trajectory(npz).ignored == ("notes",)


def test_bad_files_and_unknown_names(tmp_path):
    with pytest.raises(MeasurementError, match="no such data file"):
        load_trajectory(tmp_path / "missing.csv")
    with pytest.raises(MeasurementError, match="unsupported data format '.txt'"):
        load_trajectory(write(tmp_path, "x", "run.txt"))
    with pytest.raises(MeasurementError, match="not a UTF-8 text file"):
        path = tmp_path / "binary.csv"
        path.write_bytes(b"time,q:a\n0,\xff\n")
        load_trajectory(path)
    with pytest.raises(MeasurementError, match="cannot be read as an NPZ archive"):
        load_trajectory(write(tmp_path, "not a zip", "run.npz"))
    path = tmp_path / "object.npz"
    np.savez(path, time=np.zeros((2, 2)))
    with pytest.raises(MeasurementError, match="array 'time' must be 1-D numbers"):
        load_trajectory(path)
    data = load_trajectory(write(tmp_path, "time,q:shoulder,q:wrist\n0,1,1\n0.1,2,2\n"))
    with pytest.raises(MeasurementError, match=r"column 'q:wrist' names an unknown joint 'wrist' \(known: shoulder"):
        data.require("q", ["shoulder", "elbow"], "joint")
