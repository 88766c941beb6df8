"""Answer: generation of an answer from retrieved context (``generate``) and its prompts."""
