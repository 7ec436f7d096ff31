/*
 * For dlsym_probe.c: a library the probe links whose constructor looks cuDNN up before the preload library's
 * constructors have run (the dynamic linker initialises the program's dependencies before preloaded libraries):
 * it dlopens libcudnn.so.9 RTLD_LOCAL (through its DT_RPATH) and dlsyms a hooked and an unhooked name.
 */
#include <dlfcn.h>
#include <stddef.h>

static void *early_hooked_name, *early_unhooked_name;

__attribute__((constructor)) static void look_early(void)
{
    void *cudnn = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!cudnn)
        return;
    early_hooked_name = dlsym(cudnn, "cudnnConvolutionForward");
    early_unhooked_name = dlsym(cudnn, "cudnnCreate");
}

void *probe_early(int hooked)
{
    return hooked ? early_hooked_name : early_unhooked_name;
}
