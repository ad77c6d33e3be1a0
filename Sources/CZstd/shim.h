#ifndef AGENT_EVAL_CZSTD_SHIM_H
#define AGENT_EVAL_CZSTD_SHIM_H
#include <zstd.h>
#endif
