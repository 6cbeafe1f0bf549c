"""surf-tiny: surf's own small web-agent model (data, tokenizer, model, training, export). See train/README.md."""
