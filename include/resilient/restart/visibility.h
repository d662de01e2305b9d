/* What libresilient-restart.so exports: everything the public headers
   declare between RESILIENT_RESTART_API_BEGIN and RESILIENT_RESTART_API_END
   (the C++ API with its type information and vtables, so that users can catch
   RestartError and its kin and dynamic_cast communicators, and the C API).
   The library's own code compiles with -fvisibility=hidden, so nothing else
   is; test `restart-exports` compares the library's dynamic symbols with
   these headers. Usable from C and C++. */
#ifndef RESILIENT_RESTART_VISIBILITY_H
#define RESILIENT_RESTART_VISIBILITY_H

#if defined(__GNUC__)
#define RESILIENT_RESTART_API_BEGIN _Pragma("GCC visibility push(default)")
#define RESILIENT_RESTART_API_END _Pragma("GCC visibility pop")
#else
#define RESILIENT_RESTART_API_BEGIN
#define RESILIENT_RESTART_API_END
#endif

#endif /* RESILIENT_RESTART_VISIBILITY_H */
