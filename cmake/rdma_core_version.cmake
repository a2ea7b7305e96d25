# Which rdma-core is installed decides the private provider ABI we build for. libibverbs.pc
# carries "<abi major>.<abi minor>.<rdma-core major>.<minor>" (1.14.44.0 is rdma-core 44).
# The layouts in kernel-abi/provider_abi.h were checked for 36-58; anything else must fail
# here rather than produce a provider that calls through a shifted ops table.
set(SOFTRDMA_SUPPORTED_MIN 36)
set(SOFTRDMA_SUPPORTED_MAX 58)

if(NOT IBVERBS_VERSION MATCHES "^[0-9]+\\.[0-9]+\\.([0-9]+)")
  message(FATAL_ERROR
    "softrdma: cannot read the rdma-core version from libibverbs.pc (\"${IBVERBS_VERSION}\"). "
    "softrdma supports rdma-core ${SOFTRDMA_SUPPORTED_MIN}-${SOFTRDMA_SUPPORTED_MAX}.")
endif()
set(RDMA_CORE_VERSION ${CMAKE_MATCH_1})

if(RDMA_CORE_VERSION LESS SOFTRDMA_SUPPORTED_MIN OR RDMA_CORE_VERSION GREATER SOFTRDMA_SUPPORTED_MAX)
  message(FATAL_ERROR
    "softrdma: the installed rdma-core is version ${RDMA_CORE_VERSION} (libibverbs "
    "${IBVERBS_VERSION}); softrdma supports rdma-core ${SOFTRDMA_SUPPORTED_MIN}-"
    "${SOFTRDMA_SUPPORTED_MAX}, whose private provider ABI (IBVERBS_PRIVATE_34 and _57) "
    "it implements. Install a supported rdma-core (libibverbs-dev) or port "
    "kernel-abi/provider_abi.h to this one.")
endif()

if(RDMA_CORE_VERSION GREATER_EQUAL 57)
  set(SOFTRDMA_PABI 57)
  set(SOFTRDMA_PABI_MIN 57)
  set(SOFTRDMA_PABI_MAX 58)
else()
  set(SOFTRDMA_PABI 34)
  set(SOFTRDMA_PABI_MIN ${SOFTRDMA_SUPPORTED_MIN})
  set(SOFTRDMA_PABI_MAX 56)
endif()
message(STATUS "softrdma: rdma-core ${RDMA_CORE_VERSION}, provider ABI IBVERBS_PRIVATE_${SOFTRDMA_PABI}")
