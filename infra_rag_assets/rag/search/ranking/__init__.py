"""The learned page ranker: its page features (features), the model and its fit (ranker), and the
candidate lists it is trained on (training); packaged fits live in rankers/."""
