"""Domain adaptation of the embedding model: label-free document pairs (pairs), the training set
of a version (training_set) and the bi-encoder fine-tuning with hard negatives (finetune)."""
