"""Host data: the scene builder, Model / State / Control and their field specs, tables,
validation, geometry, mass properties and health records. Nothing here launches a kernel
(arrays are allocated and copied, no more)."""

from wpsim.core import spatial
from wpsim.core.builder import ModelBuilder
from wpsim.core.health import ContactNotConverged, HealthReport, SimulationBlowUp, SimulationError
from wpsim.core.model import Control, Model, State

__all__ = ["ContactNotConverged", "Control", "HealthReport", "Model", "ModelBuilder", "SimulationBlowUp",
           "SimulationError", "State", "spatial"]
