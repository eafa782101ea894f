// The transform table: one line per transform (each defined in its own file here). The CLI,
// --help, scenario keys and the README list come from it.
#include "models/whatif/transform.hpp"

namespace bneck {

extern const TransformDef kScaleTransform, kRemoveTransform, kFuseTransform, kPrecisionTransform, kCudaGraphTransform, kHwTransform,
    kOverlapCommTransform, kRanksTransform, kRepeatTransform, kDataParallelTransform, kTensorParallelTransform, kPipelineParallelTransform,
    kStepsTransform, kCfgTransform, kResolutionTransform, kFramesTransform, kFsdpTransform, kContextParallelTransform,
    kExpertParallelTransform, kUnprofileTransform, kBatchTransform, kPinMemoryTransform, kOverlapCopiesTransform, kHostSpeedTransform,
    kGradCompressTransform, kBatchCopiesTransform, kBucketCommTransform, kAlignGemmsTransform, kFillWavesTransform, kKeepMemoryTransform,
    kInputWorkersTransform, kDeferSyncsTransform;

const std::vector<const TransformDef*>& transform_registry() {
  static const std::vector<const TransformDef*> table = {
      &kScaleTransform,
      &kRemoveTransform,
      &kDeferSyncsTransform,
      &kKeepMemoryTransform,
      &kInputWorkersTransform,
      &kFuseTransform,
      &kPrecisionTransform,
      &kAlignGemmsTransform,
      &kFillWavesTransform,
      &kCudaGraphTransform,
      &kHwTransform,
      &kOverlapCommTransform,
      &kGradCompressTransform,
      &kBucketCommTransform,
      &kPinMemoryTransform,
      &kOverlapCopiesTransform,
      &kBatchCopiesTransform,
      &kRanksTransform,
      &kRepeatTransform,
      &kDataParallelTransform,
      &kFsdpTransform,
      &kTensorParallelTransform,
      &kPipelineParallelTransform,
      &kContextParallelTransform,
      &kExpertParallelTransform,
      &kUnprofileTransform,
      &kHostSpeedTransform,
      &kBatchTransform,
      &kStepsTransform,
      &kCfgTransform,
      &kResolutionTransform,
      &kFramesTransform,
  };
  return table;
}

}  // namespace bneck
