#include "tsr_core.h"

const char *tsr_strerror(int code)
{
    switch (code) {
    case TSR_SUCCESS: return "success";
    case TSR_EINVAL: return "invalid argument";
    case TSR_ESHAPE: return "tensor shapes do not match";
    case TSR_ETILE: return "tile sizes do not match";
    case TSR_EDTYPE: return "element types do not match";
    case TSR_EDIST: return "distribution does not match the process grid";
    case TSR_ENOMEM: return "out of memory";
    case TSR_ERUNTIME: return "runtime (StarPU/MPI) error";
    case TSR_ENOTINIT: return "Tessera is not initialised (call tsr_init first)";
    case TSR_EIO: return "I/O error";
    case TSR_EFORMAT: return "bad file format";
    case TSR_ENOTSUP: return "not supported by this build";
    case TSR_ENAN: return "NaN or Inf encountered";
    case TSR_EALREADY: return "Tessera is already initialised";
    default: return "unknown error";
    }
}
