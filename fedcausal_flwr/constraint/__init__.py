"""FedPC: the PC algorithm on pooled moments (i.i.d. rows, or a time series's lagged window
with time tiers), contemporaneous edges oriented by the pairwise likelihood ratio."""
