// The CPU launcher of the kernels under kernels/ascendc/ (kernels/ascendc/model/
// opsdk_model_driver.h, shipped with the package for the drivers `op-sdk new-op` writes).
#pragma once

#include "opsdk_model_driver.h"
