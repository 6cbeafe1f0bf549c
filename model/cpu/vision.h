// The vision path on the CPU: C-RADIO ViT per tile (spec §4), pixel shuffle v2 and the mlp1 projector
// (spec §3.2).
#pragma once

#include "model/checkpoint/config.h"
#include "model/checkpoint/tensor.h"
#include "model/checkpoint/weights.h"
#include "model/dump.h"

namespace surf::model::cpu {

// The CPE position embedding resized to a tile's patch grid: [side·side, width] (same for every tile).
Tensor tile_position_embedding(const ModelConfig& cfg, const VisionWeights& w);

// pixel_values [n_tiles, 3, S, S] (normalised) → features [n_tiles, side², width] with prefix rows dropped.
Tensor vit_forward(const ModelConfig& cfg, const VisionWeights& w, const Tensor& tile_pos,
                   const Tensor& pixel_values, Dumper* dumper);

// features [n_tiles, side², width] → embeddings [n_tiles · tokens_per_tile, d_model].
Tensor project_features(const ModelConfig& cfg, const VisionWeights& w, const Tensor& features,
                        Dumper* dumper);

}  // namespace surf::model::cpu
