/*
 * nccl-resilient: our own declarations of NCCL's plugin ABIs, written from
 * docs/reference/nccl-abi.md, never copied from NCCL.
 *
 * abi_check.h: one macro to assert struct sizes and offsets from both C11
 * and C++ so that every header in include/nccl/ checks itself wherever it
 * is compiled. Only x86-64 / aarch64 LP64 layouts are described.
 */
#ifndef RESILIENT_NCCL_ABI_CHECK_H
#define RESILIENT_NCCL_ABI_CHECK_H

#include <stddef.h>

#ifdef __cplusplus
#define NCCL_ABI_ASSERT(expr, what) static_assert(expr, what)
#else
#define NCCL_ABI_ASSERT(expr, what) _Static_assert(expr, what)
#endif

/* offsetof/sizeof checks against docs/reference/nccl-abi.md's measured numbers. */
#define NCCL_ABI_OFFSET(type, member, off) \
  NCCL_ABI_ASSERT(offsetof(type, member) == (off), #type "." #member " must be at offset " #off)
#define NCCL_ABI_SIZE(type, size) \
  NCCL_ABI_ASSERT(sizeof(type) == (size), "sizeof(" #type ") must be " #size)

NCCL_ABI_ASSERT(sizeof(void*) == 8 && sizeof(size_t) == 8 && sizeof(int) == 4,
                "the NCCL plugin ABI declarations assume an LP64 target");

#endif /* RESILIENT_NCCL_ABI_CHECK_H */
