#ifndef AGENT_EVAL_CZLIB_SHIM_H
#define AGENT_EVAL_CZLIB_SHIM_H
#include <zlib.h>
#endif
