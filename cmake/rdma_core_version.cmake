# Which rdma-core we build against decides the private provider ABI we build for.
#
# libibverbs.pc carries "<abi major>.<abi minor>.<rdma-core major>.<minor>" (1.14.44.0 is
# rdma-core 44). From PKG_CONFIG_PATH / CMAKE_PREFIX_PATH, so a build against an rdma-core
# installed in a prefix takes its version, headers and libraries from that prefix alone.
#
# The private ABI is two things: the symbol version of the entry points
# (IBVERBS_PRIVATE_<PABI>, also the provider's file suffix "-rdmav<PABI>.so" that libibverbs
# dlopens), and the layouts behind it (struct verbs_context_ops in driver.h, struct
# verbs_context in verbs.h). They did not always change together: 62.0 added two ops and
# grew verbs_context under IBVERBS_PRIVATE_59. So a build accepts, at load time, only the
# releases from the one it was built against to the last with the same layouts (an older
# libibverbs may also have smaller public structs than the headers we compiled with).
#
#   rdma-core   IBVERBS_PRIVATE_   same layouts through   ops in verbs_context_ops
#   36-56       34                 56                     76
#   57-58       57                 58                     76
#   59-61       59                 61                     79  (+alloc_dmah, dealloc_dmah, reg_mr_ex)
#   62-63       59                 63                     81  (+dm_export_dmabuf_fd, query_port_speed)
#   64          64                 64                     83  (+alloc_buf, free_buf)
#   65          65                 65                     93  (+10 completion-counter ops)
#
# (From libibverbs/driver.h, verbs.h and CMakeLists.txt of every release tag 36.0-65.0;
# tests/compat/matrix.sh checks each layout against a real release's own driver.h.)
set(SOFTRDMA_SUPPORTED_MIN 36)
set(SOFTRDMA_SUPPORTED_MAX 65)
set(SOFTRDMA_SUPPORTED "rdma-core ${SOFTRDMA_SUPPORTED_MIN}-${SOFTRDMA_SUPPORTED_MAX}")

if(NOT IBVERBS_VERSION MATCHES "^[0-9]+\\.[0-9]+\\.([0-9]+)\\.")
  message(FATAL_ERROR
    "softrdma: cannot read the rdma-core version from libibverbs.pc (\"${IBVERBS_VERSION}\", "
    "in ${IBVERBS_LIBDIR}). softrdma supports ${SOFTRDMA_SUPPORTED}.")
endif()
set(RDMA_CORE_VERSION ${CMAKE_MATCH_1})

if(RDMA_CORE_VERSION LESS SOFTRDMA_SUPPORTED_MIN)
  message(FATAL_ERROR
    "softrdma: the rdma-core in ${IBVERBS_LIBDIR} is version ${RDMA_CORE_VERSION} (libibverbs "
    "${IBVERBS_VERSION}); softrdma supports ${SOFTRDMA_SUPPORTED}. Install a newer rdma-core "
    "(libibverbs-dev), or point PKG_CONFIG_PATH and CMAKE_PREFIX_PATH at one.")
elseif(RDMA_CORE_VERSION GREATER SOFTRDMA_SUPPORTED_MAX)
  message(FATAL_ERROR
    "softrdma: the rdma-core in ${IBVERBS_LIBDIR} is version ${RDMA_CORE_VERSION} (libibverbs "
    "${IBVERBS_VERSION}), newer than any softrdma knows: it supports ${SOFTRDMA_SUPPORTED}. "
    "A new release may change the private provider ABI (libibverbs/driver.h), and a provider "
    "built blind would call through a shifted ops table. Build against rdma-core "
    "${SOFTRDMA_SUPPORTED_MAX} or older (PKG_CONFIG_PATH=PREFIX/lib/pkgconfig "
    "-DCMAKE_PREFIX_PATH=PREFIX), or port kernel-abi/provider_abi.h and this file to "
    "${RDMA_CORE_VERSION} (tests/compat/matrix.sh checks a port against the release).")
endif()

# softrdma_pabi_of(VERSION PABI_VAR LAST_VAR): the private ABI of rdma-core VERSION, and the
# last release with the same layouts.
function(softrdma_pabi_of version pabi_var last_var)
  if(version LESS 57)
    set(pabi 34)
    set(last 56)
  elseif(version LESS 59)
    set(pabi 57)
    set(last 58)
  elseif(version LESS 62)
    set(pabi 59)
    set(last 61)
  elseif(version LESS 64)
    set(pabi 59)
    set(last 63)
  else()
    set(pabi ${version})
    set(last ${version})
  endif()
  set(${pabi_var} ${pabi} PARENT_SCOPE)
  set(${last_var} ${last} PARENT_SCOPE)
endfunction()

softrdma_pabi_of(${RDMA_CORE_VERSION} SOFTRDMA_PABI SOFTRDMA_PABI_MAX)
set(SOFTRDMA_PABI_MIN ${RDMA_CORE_VERSION})
# kernel-abi/provider_abi.h lays out the ops table of this release.
add_compile_definitions(SOFTRDMA_RDMA_CORE=${RDMA_CORE_VERSION})
message(STATUS "softrdma: rdma-core ${RDMA_CORE_VERSION} (libibverbs ${IBVERBS_VERSION} in "
  "${IBVERBS_LIBDIR}), provider ABI IBVERBS_PRIVATE_${SOFTRDMA_PABI}, "
  "libsoftrdma-rdmav${SOFTRDMA_PABI}.so for rdma-core ${SOFTRDMA_PABI_MIN}-${SOFTRDMA_PABI_MAX}")

# Headers and libraries from the same prefix as the version: full paths, so the linker
# never falls back on the system's libibverbs when another is asked for.
foreach(pc IBVERBS RDMACM)
  if(${pc}_FOUND)
    set(${pc}_LIBRARIES ${${pc}_LINK_LIBRARIES})
    include_directories(BEFORE SYSTEM ${${pc}_INCLUDE_DIRS})
  endif()
endforeach()
