"""The soft-finger calibration demo (``wpsim demo``): the task of
``wpsim.tasks.finger_calibration`` fitted by Levenberg-Marquardt to a measured run, its report
(fitted against true values, RMS marker errors) as text and as files: plots, a USD stage, a
GIF and a JSON record.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from wpsim.tasks.finger_calibration import (
    DATA,
    MARKERS,
    TRUTH,
    UNITS,
    FingerCalibration,
    FingerConfig,
    rms_mm,
    targets,
    write_usd,
    write_video,
)


def calibrate(data_name: str = "fine", config: FingerConfig | None = None, out=None, device=None,
              progress: bool = True) -> dict:
    """Fit the finger to the measured run ``data_name`` ("same" or "fine", see ``DATA``);
    with ``out``, write calibration.png (loss, parameters, markers before and after),
    history.png, calibration.usd (initial and fitted rollouts), calibration.gif (the fitted
    finger with the measured and simulated markers) and calibration.json.
    Returns the report (fitted against true values, RMS marker errors in mm)."""
    from wpsim.io.measurements import load_trajectory
    from wpsim.opt.least_squares import least_squares

    config = config or FingerConfig()
    calibration = FingerCalibration(load_trajectory(DATA[data_name]), config, device)
    initial = dict(config.initial)
    before = calibration.simulate(initial)
    result = least_squares(calibration.residuals, iterations=config.iterations, progress=progress)
    fitted = result.values()
    after = calibration.simulate(fitted)
    report = {
        "data": DATA[data_name].name, "config": asdict(config),
        "parameters": {name: {"initial": initial[name], "fitted": fitted[name], "truth": TRUTH[name],
                              "relative_error": fitted[name] / TRUTH[name] - 1.0, "unit": UNITS[name]}
                       for name in UNITS},
        "rms_marker_error_mm": {"before": rms_mm(before, calibration.measured),
                                "after": rms_mm(after, calibration.measured)},
        "fit": result.to_dict(),
    }
    if out is not None:
        _write(Path(out), calibration, result, before, after, report)
    return report


def _write(out: Path, calibration: FingerCalibration, result, before, after, report: dict):
    from wpsim.io.files import write_json
    from wpsim.io.plots import plot_marker_tracking

    write_json(out / "calibration.json", report)
    result.plot(out / "history.png", "finger calibration")
    plot_marker_tracking(calibration.times, calibration.measured, {"initial guess": before, "fitted": after},
                         list(MARKERS), out / "calibration.png",
                         f"soft finger against {report['data']}: marker height and error")
    write_usd(out / "calibration.usd", calibration,
              {take: {name: entry[take] for name, entry in report["parameters"].items()}
               for take in ("initial", "fitted")}, {"initial": before, "fitted": after})
    write_video(out / "calibration.gif", calibration, after)


def describe(report: dict) -> str:
    """Recovered against true values with units, the marker errors and the costs, as text."""
    lines = [f"{'parameter':<14} {'initial':>11} {'fitted':>11} {'true':>11}  unit   error"]
    for name, entry in report["parameters"].items():
        lines.append(f"{name:<14} {entry['initial']:>11.5g} {entry['fitted']:>11.5g} {entry['truth']:>11.5g}  "
                     f"{entry['unit']:<5} {entry['relative_error'] * 100:+7.2f} %")
    rms, fit = report["rms_marker_error_mm"], report["fit"]
    lines.append(f"marker RMS error {rms['before']:.3f} mm -> {rms['after']:.3f} mm; loss {fit['loss_initial']:.4g} "
                 f"-> {fit['loss']:.4g} m^2 in {len(fit['history']) - 1} iterations, {fit['rollouts']} rollouts, "
                 f"{fit['wall_s']:.0f} s")
    lines += [f"target {name.replace('_', ' ')}: {'met' if met else 'NOT met'}" for name, met in targets(report).items()]
    return "\n".join(lines)
