// Simulated libcuda.so.1: CUDA graphs of kernel nodes.
//
// Only kernel nodes exist. Instantiation copies each node's launch (its spin time included, as
// captured when the node was added); launching an executable graph enqueues those kernels on the
// stream in node order, like back-to-back launches.

#include <string.h>

#include <algorithm>

#include "sim/gpu/cuda_exec_internal.h"
#include "sim/gpu/cuda_internal.h"

namespace hami::sim {
namespace {

CUresult GraphLaunch(CUgraphExec exec, CUstream hStream, bool per_thread) {
  CUctx_st* ctx;
  CUresult rc = CurrentContext(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  if (exec == nullptr || exec->magic != kExecMagic) return CUDA_ERROR_INVALID_VALUE;
  CUstream_st* s;
  rc = ResolveStream(hStream, per_thread, &s);
  if (rc != CUDA_SUCCESS) return rc;
  for (const auto& k : exec->kernels) {
    LaunchArgs a{k.func, k.blocks, 1, k.spin_ns};
    rc = Enqueue(s, a);
    if (rc != CUDA_SUCCESS) return rc;
  }
  return CUDA_SUCCESS;
}

CUresult AddKernelNode(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* deps,
                       size_t numDeps, const CUDA_KERNEL_NODE_PARAMS_v2& p) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (phGraphNode == nullptr || hGraph == nullptr || hGraph->magic != kGraphMagic ||
      (numDeps > 0 && deps == nullptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; i < numDeps; ++i) {
    if (deps[i] == nullptr || deps[i]->magic != kNodeMagic || deps[i]->graph != hGraph) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  LaunchArgs args;
  rc = PrepareLaunch(p.func, p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY,
                     p.blockDimZ, p.kernelParams, &args);
  if (rc != CUDA_SUCCESS) return rc == CUDA_ERROR_INVALID_HANDLE ? CUDA_ERROR_INVALID_VALUE : rc;
  auto* node = new CUgraphNode_st();
  node->graph = hGraph;
  node->params = p;
  node->spin_ns = args.spin_ns;
  // Like the real driver, argument values are captured now; GetParams hands back our copy.
  node->param_array[0] = &node->spin_ns;
  node->params.kernelParams = p.func->spin ? node->param_array : nullptr;
  node->params.extra = nullptr;
  hGraph->nodes.push_back(node);
  *phGraphNode = node;
  return CUDA_SUCCESS;
}

CUresult Instantiate(CUgraphExec* phGraphExec, CUgraph hGraph) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (phGraphExec == nullptr || hGraph == nullptr || hGraph->magic != kGraphMagic) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto* exec = new CUgraphExec_st();
  for (CUgraphNode_st* n : hGraph->nodes) {
    const auto& p = n->params;
    uint64_t blocks = static_cast<uint64_t>(p.gridDimX) * p.gridDimY * p.gridDimZ;
    exec->kernels.push_back({p.func, blocks, n->spin_ns});
  }
  *phGraphExec = exec;
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace hami::sim

using namespace hami::sim;  // NOLINT: the C ABI entry points below implement this namespace's API

// ---------------------------------------------------------------- graphs

HAMI_SIM_EXPORT CUresult cuGraphCreate(CUgraph* phGraph, unsigned int flags) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (phGraph == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  *phGraph = new CUgraph_st();
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuGraphDestroy(CUgraph hGraph) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (hGraph == nullptr || hGraph->magic != kGraphMagic) return CUDA_ERROR_INVALID_VALUE;
  for (CUgraphNode_st* n : hGraph->nodes) {
    n->magic = 0;
    delete n;
  }
  hGraph->magic = 0;
  delete hGraph;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuGraphAddKernelNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                              const CUgraphNode* dependencies,
                                              size_t numDependencies,
                                              const CUDA_KERNEL_NODE_PARAMS_v1* nodeParams) {
  if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_KERNEL_NODE_PARAMS_v2 p{};
  memcpy(&p, nodeParams, sizeof(*nodeParams));
  return AddKernelNode(phGraphNode, hGraph, dependencies, numDependencies, p);
}

HAMI_SIM_EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode* phGraphNode, CUgraph hGraph,
                                                 const CUgraphNode* dependencies,
                                                 size_t numDependencies,
                                                 const CUDA_KERNEL_NODE_PARAMS_v2* nodeParams) {
  if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return AddKernelNode(phGraphNode, hGraph, dependencies, numDependencies, *nodeParams);
}

HAMI_SIM_EXPORT CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode* nodes, size_t* numNodes) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (hGraph == nullptr || hGraph->magic != kGraphMagic || numNodes == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (nodes == nullptr) {
    *numNodes = hGraph->nodes.size();
    return CUDA_SUCCESS;
  }
  size_t n = std::min(*numNodes, hGraph->nodes.size());
  for (size_t i = 0; i < n; ++i) nodes[i] = hGraph->nodes[i];
  for (size_t i = n; i < *numNodes; ++i) nodes[i] = nullptr;
  *numNodes = n;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType* type) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (hNode == nullptr || hNode->magic != kNodeMagic || type == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *type = CU_GRAPH_NODE_TYPE_KERNEL;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuGraphKernelNodeGetParams(CUgraphNode hNode,
                                                    CUDA_KERNEL_NODE_PARAMS_v1* nodeParams) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (hNode == nullptr || hNode->magic != kNodeMagic || nodeParams == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  memcpy(nodeParams, &hNode->params, sizeof(*nodeParams));
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode,
                                                       CUDA_KERNEL_NODE_PARAMS_v2* nodeParams) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (hNode == nullptr || hNode->magic != kNodeMagic || nodeParams == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *nodeParams = hNode->params;
  return CUDA_SUCCESS;
}

HAMI_SIM_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                     unsigned long long flags) {
  return Instantiate(phGraphExec, hGraph);
}

HAMI_SIM_EXPORT CUresult cuGraphInstantiate(CUgraphExec* phGraphExec, CUgraph hGraph,
                                            CUgraphNode* phErrorNode, char* logBuffer,
                                            size_t bufferSize) {
  if (phErrorNode != nullptr) *phErrorNode = nullptr;
  if (logBuffer != nullptr && bufferSize > 0) logBuffer[0] = '\0';
  return Instantiate(phGraphExec, hGraph);
}

HAMI_SIM_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec* phGraphExec, CUgraph hGraph,
                                               CUgraphNode* phErrorNode, char* logBuffer,
                                               size_t bufferSize) {
  return cuGraphInstantiate(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

HAMI_SIM_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  return GraphLaunch(hGraphExec, hStream, false);
}

HAMI_SIM_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  return GraphLaunch(hGraphExec, hStream, true);
}

HAMI_SIM_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
  CUresult rc = CheckInit();
  if (rc != CUDA_SUCCESS) return rc;
  if (hGraphExec == nullptr || hGraphExec->magic != kExecMagic) return CUDA_ERROR_INVALID_VALUE;
  hGraphExec->magic = 0;
  delete hGraphExec;
  return CUDA_SUCCESS;
}
