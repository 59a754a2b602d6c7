# R's rpart as the oracle for privlab's tree = "rpart" (driven by benchmarks/rpart_oracle.py).
#
#   Rscript benchmarks/rpart_oracle.R DIR
#
# DIR holds what the driver wrote:
#   datasets.csv  one row per dataset: id, n, q, offset (offset into data.bin, in doubles)
#   data.bin      float64 little-endian; dataset i is its n labels (0/1) followed by its n x q
#                 features in column-major order (binary, so no decimal round trip)
#   configs.csv   one row per fit: dataset, minsplit, minbucket, cp, maxdepth
# and this script writes
#   probs.bin     float64: for every row of configs.csv, predict(fit, type = "prob")[, "1"]
#                 (in-sample probability of label 1) for the dataset's n rows, in order
#   nsplit.csv    number of splits of each fit
#
# Every fit is rpart(y ~ ., method = "class") with rpart.control's defaults except minsplit,
# minbucket, cp, maxdepth (from configs.csv) and xval = 0 (no cross-validation).
suppressPackageStartupMessages(library(rpart))

args <- commandArgs(trailingOnly = TRUE)
dir <- args[1]
datasets <- read.csv(file.path(dir, "datasets.csv"))
configs <- read.csv(file.path(dir, "configs.csv"))
total <- sum(datasets$n * (datasets$q + 1))
con <- file(file.path(dir, "data.bin"), "rb")
values <- readBin(con, "double", n = total, size = 8, endian = "little")
close(con)

frames <- vector("list", nrow(datasets))
for (i in seq_len(nrow(datasets))) {
  n <- datasets$n[i]
  q <- datasets$q[i]
  start <- datasets$offset[i]
  y <- values[start + seq_len(n)]
  x <- matrix(values[start + n + seq_len(n * q)], nrow = n, ncol = q)
  frame <- data.frame(x)
  names(frame) <- paste0("x", seq_len(q))
  frame$y <- factor(y, levels = c(0, 1))
  frames[[datasets$id[i] + 1]] <- frame
}

out <- file(file.path(dir, "probs.bin"), "wb")
nsplit <- integer(nrow(configs))
for (k in seq_len(nrow(configs))) {
  frame <- frames[[configs$dataset[k] + 1]]
  control <- rpart.control(minsplit = configs$minsplit[k], minbucket = configs$minbucket[k],
                           cp = configs$cp[k], maxdepth = configs$maxdepth[k], xval = 0)
  fit <- rpart(y ~ ., data = frame, method = "class", control = control)
  prob <- predict(fit, type = "prob")[, 2]
  writeBin(as.double(prob), out, size = 8, endian = "little")
  nsplit[k] <- sum(fit$frame$var != "<leaf>")
}
close(out)
write.csv(data.frame(nsplit = nsplit), file.path(dir, "nsplit.csv"), row.names = FALSE)
