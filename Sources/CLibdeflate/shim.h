#ifndef AGENT_EVAL_CLIBDEFLATE_SHIM_H
#define AGENT_EVAL_CLIBDEFLATE_SHIM_H
#include <libdeflate.h>
#endif
