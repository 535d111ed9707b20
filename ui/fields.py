"""Labels and help texts of every scenario field, written for someone who has never trained a model at scale, and
`plain`: engine messages with field paths (cluster.n_gpus, cost.on_prem.server_capex_usd) in the words of the
page that sets them."""
from __future__ import annotations

import re
from dataclasses import dataclass

from engine.presentation.formatting import GLOSSARY


@dataclass(frozen=True)
class Field:
    """How one scenario field is shown: label, help a manager understands, and a display unit scale."""

    label: str
    help: str
    scale: float = 1.0
    blank: str | None = None        # what a choice widget shows for an unset (None) field


F = {
    # model
    "model.preset": Field("Model", "A published model whose architecture and training setup are in the catalog. "
                                   "Picking one also sets sequence length, batch and tokens to what its authors used."),
    "model.n_layers": Field("Layers", "Number of transformer blocks stacked on top of each other."),
    "model.hidden_size": Field("Hidden size", "Width of the model: the length of the vector that represents each "
                                              "token inside the network."),
    "model.n_heads": Field("Attention heads", "Attention is split into this many heads; tensor parallelism must "
                                              "divide it."),
    "model.n_kv_heads": Field("Key/value heads", "Grouped-query attention shares keys and values among query heads; "
                                                 "leave empty for one per head (classic multi-head attention)."),
    "model.ffn_hidden_size": Field("MLP width", "Width of the feed-forward block in each layer (per expert in a "
                                                "mixture-of-experts model)."),
    "model.vocab_size": Field("Vocabulary", "Number of distinct tokens the model reads and predicts."),
    "model.ffn_type": Field("MLP type", "gelu: two matrices (GPT-3); swiglu or geglu: three matrices (Llama; Gemma)."),
    "model.head_dim": Field("Head width", "Width of one attention head. Empty: hidden size / heads; Qwen3, Gemma and "
                                          "gpt-oss use other widths."),
    "model.moe_layer_every": Field("Experts every k-th layer", "After the leading dense layers, every k-th layer has "
                                                               "experts (Llama 4 Maverick: 2); 1 for all."),
    "model.attention_window": Field("Local attention window (tokens)", "Sliding-window or chunked attention: a token "
                                                                       "looks at most this far back. Empty: full "
                                                                       "attention everywhere."),
    "model.global_attention_every": Field("Full attention every k-th layer", "With a local window, every k-th layer "
                                                                             "still attends to everything (Gemma 3: 6, "
                                                                             "gpt-oss: 2). Empty: all layers local."),
    "model.mtp_layers": Field("Multi-token-prediction modules", "Extra prediction layers trained beside the model "
                                                                "(DeepSeek-V3: 1)."),
    "model.n_experts": Field("Experts", "Mixture of experts: each layer has this many expert MLPs and each token "
                                        "uses only a few. 1 means a dense model."),
    "model.experts_per_token": Field("Experts per token", "How many experts each token is routed to."),
    "model.n_shared_experts": Field("Shared experts", "Experts every token always uses (DeepSeek style)."),
    "model.n_dense_layers": Field("Leading dense layers", "Layers at the start of an MoE model that keep a normal "
                                                          "(dense) MLP."),
    "model.tied_embeddings": Field("Tied embeddings", "The input and output token tables share their weights."),
    # training
    "training.seq_len": Field("Sequence length (tokens)", "How many tokens the model sees at once in one training "
                                                          "example (its context window during training)."),
    "training.global_batch_size": Field("Global batch (sequences)", "Sequences processed per optimizer step across "
                                                                    "the whole cluster. Larger batches use the "
                                                                    "cluster better but can hurt model quality."),
    "training.total_tokens": Field("Training tokens (billions)", "Total tokens the model is trained on; time to "
                                                                 "train scales with it. Llama 3 used 15,600 "
                                                                 "billion. For a fine-tune: the dataset's tokens "
                                                                 "(each epoch trains them once).", scale=1e9),
    "training.method": Field("Job", "Pre-training: train every weight from scratch on a large corpus. Full "
                                    "fine-tune: train every weight of a published model further. LoRA: freeze the "
                                    "model and train small low-rank adapters beside it (far less memory). QLoRA: "
                                    "the same with the frozen model stored in 4 bits."),
    "training.lora_rank": Field("LoRA rank", "Width of each adapter: it adds rank x (inputs + outputs) parameters "
                                             "to every adapted matrix. 8 to 64 is usual; MLPerf's Llama 2 70B LoRA "
                                             "uses 16."),
    "training.lora_targets": Field("Adapted matrices", "attention: the query, key, value and output projections "
                                                       "(MLPerf's reference); all_linear: also every MLP matrix "
                                                       "(QLoRA's recipe), more adapters and slightly more memory."),
    "training.expert_load_ratio": Field("Busiest expert's load (x mean)", "Mixture-of-experts routing: tokens the "
                                                                       "busiest expert receives over the average "
                                                                       "expert's. 1 is perfectly balanced, as vendor "
                                                                       "benchmarks force it; real routers run above "
                                                                       "1, and every GPU waits for the busiest one."),
    "training.epochs": Field("Epochs", "Passes over the fine-tuning data: the tokens trained are the dataset's "
                                       "tokens times the epochs."),
    "training.precision": Field("Precision", "Number format of the matrix arithmetic: bf16 is standard; fp8 and mxfp8 "
                                             "are about twice as fast where supported (mxfp8 needs Blackwell, MI350 or "
                                             "newer); nvfp4 (4-bit, MXFP4 on AMD) about four times, with some layers "
                                             "kept in bf16; int8 is Google's 8-bit training on TPUs (AQT, "
                                             "MaxText quantization=int8)."),
    "training.framework": Field("Training framework", "The software stack that trains the model: Megatron-Core / "
                                                      "NeMo, PyTorch FSDP2 (TorchTitan), DeepSpeed or JAX / MaxText "
                                                      "(TPU). Each shards, overlaps and recomputes its own way and "
                                                      "has its own fitted efficiency. Planner chooses: the layout "
                                                      "search and the answer take, for each accelerator, the fastest "
                                                      "stack that runs on it with a level fitted from public runs, "
                                                      "and say which; this layout's estimate uses the vendor's own "
                                                      "MLPerf stack.", blank="planner chooses"),
    "training.torch_compile": Field("torch.compile", "PyTorch stacks only. Compiled: the small steps between the "
                                                     "big matrix multiplies (normalisation, position rotation, "
                                                     "activation) are fused into few kernels, as the stack's "
                                                     "efficiency was measured. Eager: each runs as its own kernel and "
                                                     "reads and writes memory again; TorchTitan's Llama 3.1 8B ran "
                                                     "14% slower that way, and its async tensor parallelism needs "
                                                     "compile.", blank="compiled (as measured)"),
    "training.optimizer": Field("Optimizer", "adam keeps two extra values per parameter (the usual choice); sgd "
                                             "keeps one."),
    "training.attention": Field("Attention kernel", "flash: fused attention that never stores the full attention "
                                                    "matrix (standard today); standard: the older, memory-hungry "
                                                    "way."),
    "training.accumulate_grads_in_fp32": Field("Gradient precision", "16-bit: gradients are added up over "
                                                                      "micro-batches and averaged across "
                                                                      "accelerators in 16-bit numbers (2 bytes per "
                                                                      "parameter), as tuned runs do. fp32: 4 bytes, "
                                                                      "more exact, more memory and traffic (the "
                                                                      "frameworks' default for bf16).",
                                               blank="recipe"),
    "training.memory_headroom_fraction": Field("Memory kept free (%)", "Share of each accelerator's memory that "
                                                                       "recommended layouts leave unused, beyond the "
                                                                       "estimate, for the memory allocator's reserve "
                                                                       "and short peaks. Empty: the published "
                                                                       "default. Your own layout is still estimated "
                                                                       "when it uses this room, with a warning.",
                                               scale=0.01),
    # cluster
    "cluster.accelerator": Field("Accelerator", "The GPU or AI accelerator model, with its published peak speed, "
                                                "memory and interconnect."),
    "cluster.n_gpus": Field("Number of accelerators", "Total accelerators in the training job (all nodes)."),
    "cluster.gpus_per_node": Field("Accelerators per node", "How many accelerators share one server and its fast "
                                                            "internal links; empty: the accelerator's usual server "
                                                            "(8 for most GPUs)."),
    "cluster.host_memory_gb_per_gpu": Field("CPU memory per accelerator (GB)", "The server's CPU memory divided "
                                            "by its accelerators: where offloaded optimizer states and weights live. "
                                            "Empty: the accelerator's reference server."),
    "cluster.intra_node_bw_gbs": Field("Link inside a node (GB/s)", "Per accelerator, per direction (NVLink, "
                                                                    "Infinity Fabric). Empty: the catalog's figure."),
    "cluster.inter_node_bw_gbs": Field("Network between nodes (GB/s)", "Per accelerator, per direction "
                                                                       "(InfiniBand, RoCE). Empty: the catalog's "
                                                                       "figure (e.g. 50 for 400 Gb/s)."),
    "cluster.matmul_efficiency": Field("Measured matmul efficiency", "Share of the datasheet peak that your "
                                                                     "accelerators reach on large matrix "
                                                                     "multiplications (0-1). Empty: the published "
                                                                     "measurement."),
    "cluster.intra_node_busbw_gbs": Field("Measured bus bandwidth inside a node (GB/s)", "What nccl-tests "
                                                                                         "all-reduce reports as "
                                                                                         "busbw on one node."),
    "cluster.inter_node_busbw_gbs": Field("Measured bus bandwidth across nodes (GB/s)", "nccl-tests busbw per GPU "
                                                                                        "across nodes."),
    "cluster.intra_node_latency_us": Field("Measured latency per step inside a node (µs)", "Per ring step, fitted "
                                                                                           "from small-message "
                                                                                           "nccl-tests times on one "
                                                                                           "node."),
    "cluster.inter_node_latency_us": Field("Measured latency per step across nodes (µs)", "Per ring step, fitted "
                                                                                          "from small-message "
                                                                                          "nccl-tests times across "
                                                                                          "nodes."),
    "cluster.level_scale": Field("Measured in-training level (x the stack's fitted one)", "The factor with which the "
                                                                                        "engine reproduces a trusted "
                                                                                        "step-time log of a real run "
                                                                                        "on this cluster."),
    # layout
    "layout.tp": Field("Tensor parallel (TP)", "Splits every layer's matrices across this many accelerators; needs "
                                               "the fast links inside a node."),
    "layout.pp": Field("Pipeline parallel (PP)", "Splits the layers into this many consecutive stages on different "
                                                 "accelerators; costs some idle time (the pipeline bubble)."),
    "layout.cp": Field("Context parallel (CP)", "Splits each long sequence across this many accelerators; for very "
                                                "long sequences."),
    "layout.ep": Field("Expert parallel (EP)", "Spreads a mixture-of-experts model's experts over this many "
                                               "accelerators."),
    "layout.micro_batch_size": Field("Micro-batch (sequences)", "Sequences each accelerator processes at once; the "
                                                                "global batch is made of many micro-batches."),
    "layout.virtual_stages": Field("Virtual stages", "Interleaved pipeline: " + GLOSSARY["virtual stages"] + "."),
    "layout.zero_stage": Field("ZeRO stage", "ZeRO " + GLOSSARY["ZeRO"] + ". Saves memory, adds communication."),
    "layout.sequence_parallel": Field("Sequence parallel", "With TP: also split the layer-norm and dropout "
                                                           "activations, saving memory at no extra "
                                                           "communication."),
    "layout.recompute": Field("Recompute (activation checkpointing)", "Throw away values from the forward pass and "
                                                                      "recompute them when needed: selective "
                                                                      "drops the cheap-to-redo ones, full keeps "
                                                                      "only layer inputs (about 1/3 more "
                                                                      "compute)."),
    "layout.shard_group": Field("Shard group (HSDP)", "Hybrid sharding: " + GLOSSARY["HSDP"] + ". Empty: shard over "
                                                     "every data-parallel copy.", blank="every copy"),
    "layout.offload": Field("Offload to CPU memory", "none: everything on the accelerator. optimizer: "
                                                     "gradients go to CPU memory and the optimizer steps there "
                                                     "(ZeRO-Offload; needs ZeRO 1 or more). optimizer_and_params: "
                                                     "the weights too, fetched layer by layer (ZeRO-Infinity; needs "
                                                     "ZeRO 3). Saves accelerator memory, costs host-link time."),
    "layout.tp_comm_overlap": Field("TP overlap", GLOSSARY["TP overlap"][0].upper()
                                    + GLOSSARY["TP overlap"][1:] + ". Needs TP above 1 and sequence parallel."),
    "layout.moe_a2a_overlap": Field("All-to-all overlap", "Mixture of experts: run each micro-batch's expert "
                                    "all-to-all (dispatch and combine) while another micro-batch computes "
                                    "(Megatron-Core). Needs expert parallelism and, with pipelining, interleaved "
                                    "stages. The compute beside it slows down while it runs."),
    "layout.reshard_after_forward": Field("Reshard after forward", "ZeRO-3 / FSDP: free each "
                                          "layer's gathered weights after its forward and gather them again for the "
                                          "backward (saves memory); off keeps them to the end of the backward, as "
                                          "Llama 3 trained (saves communication)."),
    "layout.expert_tp": Field("Expert tensor parallel", "Mixture of experts: split each expert's matrices over this "
                                                       "many accelerators. Empty: the same as TP.", blank="same as TP"),
    "layout.stage_split": Field("Pipeline split", "How the layers are shared among the pipeline stages: evenly, or "
                                                  "with fewer layers on the first and last stage, which also hold the "
                                                  "token embedding and the output layer (Llama 3 405B ran 7 + 14 x 8 "
                                                  "+ 7)."),
    # site, cost, reliability
    "site.region": Field("Site region", "Where the run happens, for the grid's carbon intensity: type to search a "
                                        "country (France), a US state (US Virginia) or a cloud region (aws us-east-1, "
                                        "gcp europe-west4).", blank="world average"),
    "site.pue": Field("PUE", "Power usage effectiveness of the data centre: total facility power over IT power "
                             "(1.1 hyperscale, 1.5 typical enterprise). Empty: the default."),
    "site.market_based_g_per_kwh": Field("Contracted supply (gCO2e/kWh)", "Carbon intensity of the electricity you "
                                                                          "buy (e.g. 0 for matched renewables), for "
                                                                          "market-based CO2. Empty: not reported."),
    "site.accelerator_power_w": Field("Measured power per accelerator (W)", "Average draw during training if you "
                                                                            "measured it. Empty: TDP x a "
                                                                            "published utilisation factor."),
    "cost.basis": Field("Cost basis", "cloud: rent at a price per GPU-hour; on_prem: own the hardware "
                                      "(purchase spread over its life, power, operations)."),
    "cost.price_usd_per_gpu_hour": Field("Price (USD per GPU-hour)", "Your negotiated cloud price. Empty: the "
                                                                     "cheapest published price that matches the "
                                                                     "provider and pricing below."),
    "cost.provider": Field("Cloud provider", "Use this provider's published price, or the cheapest of all.",
                           blank="cheapest of all"),
    "cost.pricing": Field("Pricing model", "on_demand, reserved (1 or 3 years) or spot (cheaper, can be "
                                           "interrupted)."),
    "cost.on_prem.server_capex_usd": Field("Server price (USD)", "Purchase price of one accelerator server. Empty: "
                                                                 "a published price where one exists."),
    "cost.on_prem.depreciation_years": Field("Depreciation (years)", "Years the hardware cost is spread over."),
    "cost.on_prem.utilisation": Field("Utilisation of owned GPUs", "Share of the year the owned accelerators do "
                                                                   "useful work (0-1)."),
    "cost.on_prem.power_usd_per_kwh": Field("Electricity price (USD/kWh)", "What the site pays for power."),
    "cost.on_prem.ops_usd_per_gpu_year": Field("Operations per GPU-year (USD)", "Colocation, staff and support per "
                                               "accelerator and year. Empty: wholesale colocation rent for its power "
                                               "(staff and support have no public per-GPU figure: add yours)."),
    "cost.on_prem.storage_capex_usd_per_gpu": Field("Shared storage per GPU (USD)", "Purchase of shared training "
                                                    "storage per accelerator. Empty: none (node-local disks are in the "
                                                    "server price)."),
    "cost.on_prem.network_fraction": Field("Network share of the hardware", "The cluster network's share of all "
                                           "hardware cost (0-1). Empty: 0.19, as Epoch AI estimates."),
    "cost.on_prem.gpus_per_server": Field("GPUs per server", "Accelerators the server price covers. Empty: the "
                                          "published server's count."),
    "reliability.mtbf_gpu_hours": Field("MTBF per GPU (hours)", "Mean time between job-stopping failures per "
                                                                "accelerator; a cluster of N fails N times as "
                                                                "often. Empty: Llama 3's published rate."),
    "reliability.storage_write_gb_per_s": Field("Checkpoint write speed (GB/s)", "How fast the whole cluster writes "
                                                                                 "a checkpoint to storage."),
    "reliability.restart_s": Field("Restart time (s)", "From a failure to training running again."),
}

# Other engine field names a message may quote, in the app's words.
EXTRA_LABELS = {"cluster": "Cluster", "layout": "Layout", "layout.dp": "Data parallel (DP)",
                "cost.on_prem": "Owning the hardware (on-premises)", "cost.region": "Price region",
                "layout.first_stage_layers": "Pipeline split", "layout.last_stage_layers": "Pipeline split"}
PATH = re.compile(r"\b(?:model|training|cluster|layout|site|cost|reliability)(?:\.[a-z_]+)+\b")


def label_of(path: str) -> str | None:
    spec = F.get(path)
    return spec.label if spec else EXTRA_LABELS.get(path)


def plain(text: str) -> str:
    """An engine message in the app's words: field paths become the labels of the fields that set them, e.g.
    'enter cost.on_prem.server_capex_usd' -> 'enter "Server price (USD)" on the Scenario page'."""
    def label(match: re.Match) -> str:
        found = label_of(match.group(0))
        return f"\u201c{found}\u201d" if found else match.group(0)
    text = re.sub(r"(enter(?: one in)?|given in|see) ((?:model|training|cluster|layout|site|cost|reliability)(?:\.[a-z_]+)+)",
                  lambda m: f"{m.group(1)} {label(re.match(PATH, m.group(2)))} on the Scenario page"
                  if label_of(m.group(2)) else m.group(0), text)
    return PATH.sub(label, text).replace("in data/prices.json", "in the planner's price table")
